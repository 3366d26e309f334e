package dev.scorch.jobs.lmeval;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.config.GenerationConfig;
import dev.scorch.jobs.lmeval.task.TaskConfig;
import dev.scorch.jobs.lmeval.task.TaskYaml;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Greedy or sampled, and with which settings, as lm-eval's HFLM._model_generate hands the generation kwargs to
 * transformers' generate over the checkpoint's generation_config.json; --gen_kwargs over the task's.
 */
class HfSamplingTest {
    @TempDir
    Path dir;

    static final GenerationConfig PLAIN = new GenerationConfig(1, List.of(2), false, null, null, null, null);
    static final GenerationConfig SAMPLES = new GenerationConfig(1, List.of(2), true, 0.6, 0.95, null, null);

    TaskConfig task(String generationKwargs) throws Exception {
        Path p = dir.resolve("t.yaml");
        Files.writeString(
                p,
                "task: t\ndataset_path: json\ndoc_to_text: q\ndoc_to_target: a\noutput_type: generate_until\n"
                        + (generationKwargs == null ? "" : "generation_kwargs: " + generationKwargs + "\n"));
        return TaskConfig.from(TaskYaml.load(p), p);
    }

    HfSampling sampling(String generationKwargs, Map<String, Object> cli, GenerationConfig gc) throws Exception {
        TaskConfig t = task(generationKwargs);
        return HfSampling.of(TaskPlan.generationKwargs(t, cli, "t: "), gc, "t: ");
    }

    @Test
    void doSampleTrueSamplesWithTransformersDefaultsUnderTheTasksTemperature() throws Exception {
        assertEquals(
                new HfSampling(true, 0.7, 50, 1.0),
                sampling("{until: [\"\\n\"], do_sample: true, temperature: 0.7}", null, PLAIN));
        // generation_config.json's top_p applies; its temperature does not (the task's wins)
        assertEquals(
                new HfSampling(true, 0.7, 50, 0.95), sampling("{do_sample: true, temperature: 0.7}", null, SAMPLES));
        // the task's own top_k / top_p win over both
        assertEquals(
                new HfSampling(true, 0.7, 5, 0.5),
                sampling("{do_sample: true, temperature: 0.7, top_k: 5, top_p: 0.5}", null, SAMPLES));
    }

    @Test
    void greedyUnlessSampleIsAskedForOrLeftToTheCheckpoint() throws Exception {
        assertEquals(HfSampling.GREEDY, sampling(null, null, SAMPLES)); // lm-eval's default: do_sample false
        assertEquals(HfSampling.GREEDY, sampling("{do_sample: false, temperature: 0.7}", null, SAMPLES));
        assertEquals(HfSampling.GREEDY, sampling("{until: [\"\\n\"]}", null, SAMPLES)); // temperature 0
        // a temperature without do_sample: generation_config.json's do_sample decides
        assertEquals(HfSampling.GREEDY, sampling("{temperature: 0.7}", null, PLAIN));
        assertEquals(new HfSampling(true, 0.7, 50, 0.95), sampling("{temperature: 0.7}", null, SAMPLES));
    }

    @Test
    void genKwargsOverrideTheTasks() throws Exception {
        Map<String, Object> cli = new LinkedHashMap<>();
        cli.put("do_sample", true);
        cli.put("temperature", 0.8);
        assertEquals(new HfSampling(true, 0.8, 50, 1.0), sampling("{until: [\"\\n\"], max_gen_toks: 8}", cli, PLAIN));
        assertEquals(new HfSampling(true, 0.8, 50, 1.0), sampling(null, cli, PLAIN));
    }

    @Test
    void doSampleAtTemperatureZeroIsRefused() {
        String m = assertThrows(IllegalArgumentException.class, () -> sampling("{do_sample: true}", null, PLAIN))
                .getMessage();
        assertTrue(m.startsWith("t: ") && m.contains("temperature above 0"), m);
        assertThrows(
                IllegalArgumentException.class,
                () -> sampling("{do_sample: true, temperature: 1, top_p: 0}", null, PLAIN));
    }
}
