package dev.scorch.jobs.lmeval.task;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TaskYamlTest {
    @TempDir
    Path dir;

    private Path write(String name, String text) throws Exception {
        Path p = dir.resolve(name);
        Files.createDirectories(p.getParent());
        Files.writeString(p, text);
        return p;
    }

    @Test
    void includeIsRelativeToTheIncludingFileRecursiveAndTheChildWins() throws Exception {
        write("base/_root.yaml", "output_type: multiple_choice\ntarget_delimiter: ' '\nnum_fewshot: 0\n");
        write("base/_mid.yaml", "include: _root.yaml\nnum_fewshot: 5\ndescription: mid\ntask_list: [x]\n");
        Path task = write("tasks/t.yaml", "include: ../base/_mid.yaml\ntask: t\ndescription: own\n");
        Map<String, Object> cfg = TaskYaml.load(task);
        assertEquals("t", cfg.get("task"));
        assertEquals("own", cfg.get("description")); // the file's own key beats the include's
        assertEquals(5, cfg.get("num_fewshot")); // the nearer include beats the deeper one
        assertEquals("multiple_choice", cfg.get("output_type"));
        assertFalse(cfg.containsKey("include"));
        assertFalse(cfg.containsKey("task_list")); // an included file's task_list is not inherited
    }

    @Test
    void aListOfIncludesMergesInOrder() throws Exception {
        write("a.yaml", "x: 1\ny: 1\n");
        write("b.yaml", "y: 2\nz: 2\n");
        Map<String, Object> cfg = TaskYaml.load(write("t.yaml", "include: [a.yaml, b.yaml]\ntask: t\n"));
        assertEquals(1, cfg.get("x"));
        assertEquals(2, cfg.get("y"));
        assertEquals(2, cfg.get("z"));
    }

    @Test
    void anIncludeCycleIsRefusedNamingTheChain() throws Exception {
        write("a.yaml", "include: b.yaml\n");
        write("b.yaml", "include: a.yaml\n");
        var e = assertThrows(IllegalArgumentException.class, () -> TaskYaml.load(dir.resolve("a.yaml")));
        assertTrue(e.getMessage().contains("include cycle"), e.getMessage());
        assertTrue(e.getMessage().contains("b.yaml"), e.getMessage());
    }

    @Test
    void aMissingIncludeNamesTheFileAndField() throws Exception {
        Path t = write("t.yaml", "include: nope.yaml\ntask: t\n");
        var e = assertThrows(IllegalArgumentException.class, () -> TaskYaml.load(t));
        assertTrue(e.getMessage().startsWith(t.toString()), e.getMessage());
        assertTrue(e.getMessage().contains("'include'"), e.getMessage());
    }

    @Test
    void functionTagsAreRecordedNotRun() throws Exception {
        Path t = write("t.yaml", "task: t\nprocess_docs: !function utils.process_docs\n");
        Map<String, Object> cfg = TaskYaml.load(t);
        assertEquals(new FunctionRef("utils.process_docs", t.toAbsolutePath().normalize()), cfg.get("process_docs"));
    }

    @Test
    void pythonObjectTagsAreRefused() throws Exception {
        Path t = write("t.yaml", "task: !!python/object/apply:os.system ['true']\n");
        var e = assertThrows(IllegalArgumentException.class, () -> TaskYaml.load(t));
        assertTrue(e.getMessage().contains("not valid YAML"), e.getMessage());
    }

    @Test
    void yaml11ScalarsReadAsPyYamlReadsThem() throws Exception {
        Map<String, Object> cfg = TaskYaml.load(write("t.yaml", "a: yes\nb: 1.0\nc: '5'\nd: null\ne: [1, two]\n"));
        assertEquals(Boolean.TRUE, cfg.get("a"));
        assertEquals(1.0, cfg.get("b"));
        assertEquals("5", cfg.get("c"));
        assertTrue(cfg.containsKey("d"));
        assertEquals(List.of(1, "two"), cfg.get("e"));
    }

    @Test
    void limitsHold() throws Exception {
        Path big = write("big.yaml", "task: t\nx: '" + "a".repeat(TaskYaml.MAX_FILE_BYTES) + "'\n");
        assertTrue(assertThrows(IllegalArgumentException.class, () -> TaskYaml.load(big))
                .getMessage()
                .contains("over the limit"));
        Path deep = write("deep.yaml", "x: " + "[".repeat(TaskYaml.MAX_DEPTH + 5) + "]".repeat(TaskYaml.MAX_DEPTH + 5));
        assertThrows(IllegalArgumentException.class, () -> TaskYaml.load(deep));
        StringBuilder bomb = new StringBuilder("a: &a [x, x]\n");
        for (int i = 0; i < 60; i++) {
            bomb.append("a")
                    .append(i)
                    .append(": &a")
                    .append(i)
                    .append(" [*a, *a]\n".replace("*a", i == 0 ? "*a" : "*a" + (i - 1)));
        }
        Path aliases = write("bomb.yaml", bomb.toString());
        assertThrows(IllegalArgumentException.class, () -> TaskYaml.load(aliases));
    }

    @Test
    void aFileThatIsNotAMappingIsRefused() throws Exception {
        Path t = write("t.yaml", "- a\n- b\n");
        var e = assertThrows(IllegalArgumentException.class, () -> TaskYaml.load(t));
        assertTrue(e.getMessage().contains("expected a mapping"), e.getMessage());
    }
}
