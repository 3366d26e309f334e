package dev.scorch.udfs.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.CheckpointException;
import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.model.ModelInfo;
import dev.scorch.udfs.api.ApiTests;
import dev.scorch.udfs.api.ScorchModel;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A checkpoint named by a URI of another Hadoop file system ({@link RemoteTestFileSystem}, standing for hdfs:// and
 * s3a://): checked on the driver from its small files and shard headers, with the local folder's manifest, and copied
 * by the executors to score exactly as the local folder does.
 */
class RemoteCheckpointTest {
    @TempDir
    static Path shared;

    @TempDir
    Path tmp;

    static Path model;
    static ModelManifest manifest;

    @BeforeAll
    static void writeModel() throws IOException {
        model = shared.resolve("remote-tiny");
        new DemoModelWriter(DemoPreset.TINY, false, true, 5).write(model);
        manifest = ModelManifest.of(model);
    }

    @AfterEach
    void serveChecksumsAgain() {
        RemoteTestFileSystem.serveCrc32c = true;
    }

    static long shardBytes() {
        return manifest.files().stream()
                .filter(f -> f.name().endsWith(".safetensors"))
                .mapToLong(ModelManifest.FileEntry::size)
                .sum();
    }

    @Test
    void aFileSystemsCrc32cGivesTheLocalManifestReadingHeadersOnly() {
        long before = RemoteTestFileSystem.bytesRead();
        RemoteCheckpoint.Staged staged =
                RemoteCheckpoint.stage(RemoteTestFileSystem.uri(model), new Configuration(), tmp.resolve("staging"));
        long read = RemoteTestFileSystem.bytesRead() - before;

        assertEquals(manifest, staged.manifest(), "same files, sizes, CRC32Cs and content hash as the local folder");
        assertTrue(read < shardBytes() / 20, read + " bytes read of " + shardBytes() + " in shards");
        ModelInfo local = ModelInfo.of(model);
        ModelInfo remote = ModelInfo.of(staged.dir());
        assertEquals(local.config(), remote.config());
        assertEquals(local.parametersByDtype(), remote.parametersByDtype());
        assertEquals(local.storageByGroup(), remote.storageByGroup());
        assertEquals(local.bytesOnDisk(), remote.bytesOnDisk());
        assertEquals(local.tokenizer(), remote.tokenizer());
        assertEquals(local.validation(), remote.validation());
        assertTrue(remote.validation().valid(), remote.validation().toString());
    }

    @Test
    void withoutAChecksumTheDriverReadsTheShardsThrough() {
        RemoteTestFileSystem.serveCrc32c = false;
        long before = RemoteTestFileSystem.bytesRead();
        RemoteCheckpoint.Staged staged =
                RemoteCheckpoint.stage(RemoteTestFileSystem.uri(model), new Configuration(), tmp.resolve("staging"));
        assertEquals(manifest, staged.manifest());
        assertTrue(RemoteTestFileSystem.bytesRead() - before >= shardBytes());
    }

    /** The stand-in's shards hold headers and holes: nothing can take them for the model's weights. */
    @Test
    void theStagedFolderFailsTheManifest() {
        RemoteCheckpoint.Staged staged =
                RemoteCheckpoint.stage(RemoteTestFileSystem.uri(model), new Configuration(), tmp.resolve("staging"));
        CheckpointException e =
                assertThrows(CheckpointException.class, () -> staged.manifest().verify(staged.dir()));
        assertTrue(e.getMessage().contains("differs from the manifest"), e.getMessage());
    }

    @Test
    void refusesAHeaderPastTheFileAndAFileForAFolder() throws IOException {
        Path broken = tmp.resolve("broken");
        Files.createDirectories(broken);
        try (Stream<Path> s = Files.list(model)) {
            for (Path p : s.toList()) {
                Files.copy(p, broken.resolve(p.getFileName()));
            }
        }
        Path shard;
        try (Stream<Path> s = Files.list(broken)) {
            shard = s.filter(p -> p.toString().endsWith(".safetensors"))
                    .findFirst()
                    .orElseThrow();
        }
        try (RandomAccessFile f = new RandomAccessFile(shard.toFile(), "rw")) {
            f.write(new byte[] {(byte) 0xff, (byte) 0xff, (byte) 0xff, 0x7f, 0, 0, 0, 0}); // header length 2 GiB
        }
        CheckpointException e = assertThrows(
                CheckpointException.class,
                () -> RemoteCheckpoint.stage(
                        RemoteTestFileSystem.uri(broken), new Configuration(), tmp.resolve("staging")));
        assertTrue(e.getMessage().contains(shard.getFileName() + ": header length 2147483647"), e.getMessage());

        CheckpointException notFolder = assertThrows(
                CheckpointException.class,
                () -> RemoteCheckpoint.stage(
                        RemoteTestFileSystem.uri(shard), new Configuration(), tmp.resolve("staging")));
        assertTrue(notFolder.getMessage().endsWith("not a model folder"), notFolder.getMessage());
    }

    /** A configuration or tokenizer file past the limit is refused by its listed size, before a byte is copied. */
    @Test
    void refusesAnOversizedTokenizerFile() throws IOException {
        Path big = tmp.resolve("big");
        Files.createDirectories(big);
        try (Stream<Path> s = Files.list(model)) {
            for (Path p : s.toList()) {
                Files.copy(p, big.resolve(p.getFileName()));
            }
        }
        try (RandomAccessFile f =
                new RandomAccessFile(big.resolve("tokenizer.json").toFile(), "rw")) {
            f.setLength(RemoteCheckpoint.MAX_METADATA_BYTES + 1); // a hole: no disk used
        }
        long before = RemoteTestFileSystem.bytesRead();
        CheckpointException e = assertThrows(
                CheckpointException.class,
                () -> RemoteCheckpoint.stage(
                        RemoteTestFileSystem.uri(big), new Configuration(), tmp.resolve("staging")));
        assertTrue(e.getMessage().contains("tokenizer.json: 268435457 bytes, more than the 268435456"), e.getMessage());
        assertTrue(RemoteTestFileSystem.bytesRead() - before < (1 << 20), "the big file was not read");
    }

    @Test
    void onlyUrisOfOtherFileSystemsAreRemote() {
        assertTrue(RemoteCheckpoint.isRemote("hdfs://nn:8020/models/K2"));
        assertTrue(RemoteCheckpoint.isRemote("s3a://bucket/models/K2"));
        assertFalse(RemoteCheckpoint.isRemote("file:///models/K2"));
        assertFalse(RemoteCheckpoint.isRemote("/models/K2"));
        assertFalse(RemoteCheckpoint.isRemote("models/a://b"));
        assertFalse(RemoteCheckpoint.isRemote("C://models"));
    }

    /** A file: URI names the local folder, in each of its spellings; it is checked as the plain path is. */
    @Test
    void fileUrisNameTheLocalFolder() {
        String hash = dev.scorch.udfs.api.CheckedModel.of(model.toString(), new Configuration())
                .manifest()
                .shortHash();
        for (String uri :
                List.of(model.toUri().toString(), "file://" + model, "file:" + model, "file://localhost" + model)) {
            var checked = dev.scorch.udfs.api.CheckedModel.of(uri, new Configuration());
            assertEquals(model, checked.dir(), uri);
            assertFalse(checked.remote(), uri);
            assertEquals(hash, checked.manifest().shortHash(), uri);
        }
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> dev.scorch.udfs.api.CheckedModel.of("file://otherhost" + model, new Configuration()));
        assertTrue(e.getMessage().contains("file://otherhost"), e.getMessage());
    }

    /** s3a:// without hadoop-aws on the class path (as in these tests) names the URI and the jars to add. */
    @Test
    void s3aWithoutItsConnectorNamesTheJarToAdd() {
        assertThrows(
                ClassNotFoundException.class,
                () -> Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem"),
                "hadoop-aws must be absent from the test class path");
        CheckpointException e = assertThrows(
                CheckpointException.class,
                () -> dev.scorch.udfs.api.CheckedModel.of("s3a://bucket/models/K2", new Configuration()));
        String m = e.getMessage();
        assertTrue(m.startsWith("s3a://bucket/models/K2: "), m);
        assertTrue(m.contains("org.apache.hadoop:hadoop-aws:" + org.apache.hadoop.util.VersionInfo.getVersion()), m);
        assertTrue(m.contains("software.amazon.awssdk:bundle"), m);
        assertTrue(m.contains("S3AFileSystem"), m);
    }

    /**
     * Loaded by URI on local[2], the model is copied into the executor's model cache and scores every row as the local
     * folder does, under the same label; broadcast, which reads the folder on the driver, is refused.
     */
    @Test
    void scoresAsTheLocalFolderDoes() {
        var spark = ApiTests.spark();
        StructType schema = new StructType()
                .add("id", DataTypes.IntegerType)
                .add("token_ids", DataTypes.createArrayType(DataTypes.IntegerType));
        Dataset<Row> df = spark.createDataFrame(
                List.of(
                        RowFactory.create(0, List.of(5, 17, 300, 2)),
                        RowFactory.create(1, List.of(1, 2, 3, 4, 5, 6, 7)),
                        RowFactory.create(2, List.of(9, 99999))),
                schema);
        String uri = RemoteTestFileSystem.uri(model);
        try (ScorchModel local = ScorchModel.load(spark, model.toString());
                ScorchModel remote = ScorchModel.load(spark, uri)) {
            assertEquals("shared-path", remote.weights());
            assertEquals(local.label(), remote.label());
            List<Row> a = local.score(df).orderBy("id").collectAsList();
            List<Row> b = remote.score(df).orderBy("id").collectAsList();
            assertEquals(a, b);
            assertTrue(a.get(1).getAs("error") == null, a.get(1).toString());
        }
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class, () -> ScorchModel.load(spark, uri, Map.of("weights", "broadcast")));
        assertTrue(e.getMessage().contains("is on another file system: use shared-path"), e.getMessage());
    }
}
