package dev.scorch.jobs.lmeval.task;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DataFilesTest {
    @TempDir
    Path dir;

    private Path touch(String name) throws Exception {
        Path p = dir.resolve(name);
        Files.createDirectories(p.getParent());
        Files.writeString(p, "{}\n");
        return p;
    }

    private TaskConfig task(String yaml) throws Exception {
        Path p = dir.resolve("tasks/t.yaml");
        Files.createDirectories(p.getParent());
        Files.writeString(p, yaml);
        return TaskConfig.from(TaskYaml.load(p), p);
    }

    @Test
    void aMapOfSplitsRelativeToTheTaskFile() throws Exception {
        Path test = touch("tasks/data/test.jsonl");
        Path a = touch("tasks/data/train-a.jsonl");
        Path b = touch("tasks/data/train-b.jsonl");
        TaskConfig t = task(
                "task: t\ndataset_path: json\n"
                        + "dataset_kwargs: {data_files: {test: data/test.jsonl, train: [data/train-b.jsonl, data/train-a.jsonl]}}\n");
        DataFiles f = DataFiles.resolve(t, Map.of());
        assertEquals("json", f.format());
        assertEquals(List.of(test), f.split(t, "test"));
        assertEquals(List.of(b, a), f.split(t, "train")); // in the order given
        String m = assertThrows(IllegalArgumentException.class, () -> f.split(t, "validation"))
                .getMessage();
        assertTrue(m.contains("'validation'") && m.contains("test"), m);
    }

    @Test
    void aStringOrListIsTheTrainSplit() throws Exception {
        Path x = touch("tasks/x.csv");
        TaskConfig t = task("task: t\ndataset_path: csv\ndataset_kwargs: {data_files: x.csv}\n");
        assertEquals(Map.of("train", List.of(x)), DataFiles.resolve(t, Map.of()).splits());
        TaskConfig l = task("task: t\ndataset_path: csv\ndataset_kwargs: {data_files: [x.csv]}\n");
        assertEquals(Map.of("train", List.of(x)), DataFiles.resolve(l, Map.of()).splits());
    }

    @Test
    void globsMatchInTheirFolder() throws Exception {
        Path s0 = touch("tasks/shards/test-00000.parquet");
        Path s1 = touch("tasks/shards/test-00001.parquet");
        touch("tasks/shards/train-00000.parquet");
        TaskConfig t =
                task("task: t\ndataset_path: parquet\ndataset_kwargs: {data_files: {test: 'shards/test-*.parquet'}}\n");
        assertEquals(List.of(s0, s1), DataFiles.resolve(t, Map.of()).split(t, "test"));
    }

    @Test
    void missingFilesNameTheField() throws Exception {
        TaskConfig t = task("task: t\ndataset_path: json\ndataset_kwargs: {data_files: {test: nope.jsonl}}\n");
        String m = assertThrows(IllegalArgumentException.class, () -> DataFiles.resolve(t, Map.of()))
                .getMessage();
        assertTrue(m.contains("dataset_kwargs.data_files.test") && m.contains("nope.jsonl"), m);
        TaskConfig none = task("task: t\ndataset_path: json\n");
        m = assertThrows(IllegalArgumentException.class, () -> DataFiles.resolve(none, Map.of()))
                .getMessage();
        assertTrue(m.contains("dataset_kwargs.data_files"), m);
    }

    @Test
    void aHubDatasetMapsToAFolderOfSplitFiles() throws Exception {
        Path test = touch("hub/arc/test.jsonl");
        Path val = touch("hub/arc/validation.jsonl");
        touch("hub/arc/README.md");
        TaskConfig t = task("task: t\ndataset_path: allenai/ai2_arc\ndataset_name: ARC-Easy\n");
        Map<String, Path> dirs =
                DataFiles.parseDatasetDirs(List.of("allenai/ai2_arc/ARC-Easy=" + dir.resolve("hub/arc")));
        DataFiles f = DataFiles.resolve(t, dirs);
        assertEquals("json", f.format());
        assertEquals(Map.of("test", List.of(test), "validation", List.of(val)), f.splits());
        // the name without the config maps every config of the dataset
        Path shard0 = touch("hub/gsm/test-00000-of-00002.parquet");
        Path shard1 = touch("hub/gsm/test-00001-of-00002.parquet");
        TaskConfig g = task("task: g\ndataset_path: openai/gsm8k\ndataset_name: main\n");
        DataFiles gf =
                DataFiles.resolve(g, DataFiles.parseDatasetDirs(List.of("openai/gsm8k=" + dir.resolve("hub/gsm"))));
        assertEquals("parquet", gf.format());
        assertEquals(List.of(shard0, shard1), gf.split(g, "test"));
    }

    @Test
    void aHubDatasetWithoutAFolderIsRefusedNamingTheKey() throws Exception {
        TaskConfig t = task("task: t\ndataset_path: cais/mmlu\ndataset_name: anatomy\n");
        String m = assertThrows(IllegalArgumentException.class, () -> DataFiles.resolve(t, Map.of()))
                .getMessage();
        assertTrue(m.contains("--dataset_dir cais/mmlu/anatomy=FOLDER"), m);
        assertThrows(IllegalArgumentException.class, () -> DataFiles.parseDatasetDirs(List.of("noequals")));
    }

    @Test
    void aFolderMixingFormatsIsRefused() throws Exception {
        touch("mix/test.jsonl");
        touch("mix/train.parquet");
        TaskConfig t = task("task: t\ndataset_path: x/y\n");
        String m = assertThrows(
                        IllegalArgumentException.class, () -> DataFiles.resolve(t, Map.of("x/y", dir.resolve("mix"))))
                .getMessage();
        assertTrue(m.contains("mixes"), m);
    }
}
