package dev.scorch.jobs.lmeval.task;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.jobs.lmeval.task.TaskRegistry.GroupNode;
import dev.scorch.jobs.lmeval.task.TaskRegistry.Node;
import dev.scorch.jobs.lmeval.task.TaskRegistry.TaskNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TaskRegistryTest {
    @TempDir
    Path dir;

    private void write(String name, String text) throws Exception {
        Path p = dir.resolve(name);
        Files.createDirectories(p.getParent());
        Files.writeString(p, text);
    }

    private static List<String> names(List<Node> nodes) {
        return nodes.stream().map(Node::name).toList();
    }

    private void fourTasks() throws Exception {
        write("a/_common.yaml", "output_type: multiple_choice\ndataset_path: json\nnum_fewshot: 0\n");
        write("a/t1.yaml", "include: _common.yaml\ntask: t1\ntag: [easy, all]\n");
        write("a/t2.yaml", "include: _common.yaml\ntask: t2\ntag: all\n");
        write("b/t3.yaml", "task: t3\ntag: [all]\noutput_type: generate_until\n");
        write("b/t4.yaml", "task: t4\n");
    }

    @Test
    void indexesTasksGroupsAndTags() throws Exception {
        fourTasks();
        write("g.yaml", "group: g\ntask: [t1, t3]\n");
        TaskRegistry r = TaskRegistry.scan(List.of(dir));
        assertEquals(TaskRegistry.Kind.TASK, r.index().get("t1").kind());
        assertEquals(TaskRegistry.Kind.GROUP, r.index().get("g").kind());
        assertEquals(TaskRegistry.Kind.TAG, r.index().get("all").kind());
        // _common.yaml has no task or group: left out, with the reason
        assertTrue(
                r.skipped().containsKey(dir.resolve("a/_common.yaml")),
                r.skipped().toString());
        assertEquals(
                OutputType.MULTIPLE_CHOICE,
                ((TaskNode) r.resolve("t1").get(0)).config().outputType());
    }

    @Test
    void aTagNamesAllItsTasksInNameOrder() throws Exception {
        fourTasks();
        TaskRegistry r = TaskRegistry.scan(List.of(dir));
        assertEquals(List.of("t1", "t2", "t3"), names(r.resolve("all")));
        assertEquals(List.of("t1"), names(r.resolve("easy")));
    }

    @Test
    void aLaterFolderOverridesAnEarlierOne() throws Exception {
        write("builtin/x.yaml", "task: x\ndescription: builtin\n");
        write("mine/x.yaml", "task: x\ndescription: mine\n");
        TaskRegistry r = TaskRegistry.scan(List.of(dir.resolve("builtin"), dir.resolve("mine")));
        assertEquals("mine", ((TaskNode) r.resolve("x").get(0)).config().description());
    }

    @Test
    void groupsHoldTasksTagsNestedAndInlineGroupsAndOverrides() throws Exception {
        fourTasks();
        write("inner.yaml", "group: inner\ntask: [t4]\n");
        write("g.yaml", """
                group: g
                group_alias: The G
                num_fewshot: 2
                task:
                  - t1
                  - task: t2
                    num_fewshot: 7
                  - easy
                  - inner
                  - group: sub
                    task: [t3]
                    aggregate_metric_list: {metric: exact_match}
                  - task: fresh
                    dataset_path: json
                    output_type: loglikelihood
                aggregate_metric_list:
                  - metric: acc
                    weight_by_size: false
                    filter_list: none
                metadata: {version: 1}
                """);
        TaskRegistry r = TaskRegistry.scan(List.of(dir));
        GroupNode g = assertInstanceOf(GroupNode.class, r.resolve("g").get(0));
        assertEquals("The G", g.group().groupAlias());
        assertEquals(
                List.of(new TaskRegistry.AggregateMetric("acc", List.of("none"), "mean", false)),
                g.group().aggregateMetricList());
        assertEquals(List.of("t1", "t2", "t1", "inner", "g::sub", "g::fresh"), names(g.children()));
        // the group's own non-group keys override its tasks; an item's keys override the group's
        assertEquals(2, ((TaskNode) g.children().get(0)).config().numFewshot());
        assertEquals(7, ((TaskNode) g.children().get(1)).config().numFewshot());
        GroupNode inner = (GroupNode) g.children().get(3);
        assertEquals(2, inner.leaves().get(0).numFewshot()); // overrides reach into nested groups
        GroupNode sub = (GroupNode) g.children().get(4);
        assertEquals("t3", sub.leaves().get(0).task());
        assertTrue(sub.group().aggregateMetricList().get(0).weightBySize());
        assertNull(sub.group().aggregateMetricList().get(0).filterList());
        TaskConfig fresh = ((TaskNode) g.children().get(5)).config();
        assertEquals(OutputType.LOGLIKELIHOOD, fresh.outputType());
        assertEquals(6, g.leaves().size());
    }

    @Test
    void aGroupReferencedWithOverrides() throws Exception {
        fourTasks();
        write("inner.yaml", "group: inner\ntask: [t4]\n");
        write("g.yaml", "group: g\ntask: [{group: inner, num_fewshot: 4}]\n");
        GroupNode g = (GroupNode) TaskRegistry.scan(List.of(dir)).resolve("g").get(0);
        assertEquals("inner", g.children().get(0).name());
        assertEquals(4, ((GroupNode) g.children().get(0)).leaves().get(0).numFewshot());
    }

    @Test
    void groupErrorsNameGroupFileAndField() throws Exception {
        fourTasks();
        write("g.yaml", "group: g\ntask: [t1, nope]\n");
        write("h.yaml", "group: h\ntask: [t1]\naggregate_metric_list: [{metric: acc, aggregation: median}]\n");
        TaskRegistry r = TaskRegistry.scan(List.of(dir));
        String m = assertThrows(IllegalArgumentException.class, () -> r.resolve("g"))
                .getMessage();
        assertTrue(m.contains("group 'g'") && m.contains("g.yaml") && m.contains("task[1]") && m.contains("'nope'"), m);
        m = assertThrows(IllegalArgumentException.class, () -> r.resolve("h")).getMessage();
        assertTrue(m.contains("aggregate_metric_list[0].aggregation") && m.contains("median"), m);
    }

    @Test
    void aTaskInTwoNamedGroupsIsRefused() throws Exception {
        fourTasks();
        write("g.yaml", "group: g\ntask: [t1]\n");
        write("h.yaml", "group: h\ntask: [t1, t2]\n");
        TaskRegistry r = TaskRegistry.scan(List.of(dir));
        String m = assertThrows(IllegalArgumentException.class, () -> r.resolve(List.of("g", "h")))
                .getMessage();
        assertTrue(m.contains("'t1'") && m.contains("'g'") && m.contains("'h'"), m);
        assertEquals(List.of("g", "t2"), names(r.resolve(List.of("g", "t2"))));
    }

    @Test
    void anUnknownNameListsTheFilesLeftOut() throws Exception {
        fourTasks();
        write("broken.yaml", "task: [unclosed\n");
        TaskRegistry r = TaskRegistry.scan(List.of(dir));
        String m = assertThrows(IllegalArgumentException.class, () -> r.resolve("zzz"))
                .getMessage();
        assertTrue(m.contains("'zzz'") && m.contains("broken.yaml"), m);
    }

    @Test
    void aPythonTaskIsRefusedWhenAskedFor() throws Exception {
        write("py.yaml", "task: py\nclass: !function tasks.MyTask\n");
        TaskRegistry r = TaskRegistry.scan(List.of(dir));
        assertEquals(TaskRegistry.Kind.PY_TASK, r.index().get("py").kind());
        String m = assertThrows(IllegalArgumentException.class, () -> r.resolve("py"))
                .getMessage();
        assertTrue(m.contains("'py'") && m.contains("class") && m.contains("Python"), m);
    }

    @Test
    void aYamlPathIsAccepted() throws Exception {
        write("elsewhere/solo.yaml", "task: solo\n");
        TaskRegistry r = TaskRegistry.scan(List.of());
        assertEquals(
                List.of("solo"),
                names(r.resolve(dir.resolve("elsewhere/solo.yaml").toString())));
    }
}
