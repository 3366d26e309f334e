package dev.scorch.engine.tokenizer;

import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.lib.fn.ELFunctionDefinition;
import java.io.IOException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What the render sandbox costs a row: DeepSeek-V3's chat template on a four-message chat, rendered by
 * {@link ChatTemplate} (worker thread, checks, sandbox resolver) and by a bare Jinjava configured as
 * ChatTemplate was before the sandbox (same template, variables and functions, on the calling thread).
 * Sample mode: JMH prints the median (p0.50). Run: {@code dev/jmh ChatTemplateBenchmark}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Threads(1)
@Fork(
        value = 1,
        jvmArgsAppend = {"-Xmx2g"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class ChatTemplateBenchmark {
    private ChatTemplate guarded;
    private Jinjava bare;
    private String template;
    private List<Map<String, Object>> chat;

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        guarded = ChatTemplateSandboxTest.deepSeek();
        template = guarded.template();
        bare = new Jinjava(JinjavaConfig.newBuilder()
                .withTrimBlocks(true)
                .withLstripBlocks(true)
                .withMaxOutputSize(64L << 20)
                .build());
        bare.getGlobalContext()
                .registerFunction(new ELFunctionDefinition(
                        "", "raise_exception", ChatTemplate.class, "raiseException", String.class));
        bare.getGlobalContext()
                .registerFunction(
                        new ELFunctionDefinition("", "strftime_now", ChatTemplate.class, "strftimeNow", String.class));
        bare.getGlobalContext().registerFilter(new ChatTemplate.PythonToJson());
        chat = List.of(
                Map.of("role", "system", "content", "You are a helpful assistant."),
                Map.of("role", "user", "content", "What is 2+2?"),
                Map.of("role", "assistant", "content", "4"),
                Map.of("role", "user", "content", "And 3+3? Answer with one number."));
        String a = guarded.renderMaps(chat, true, Map.of());
        String b = unguarded();
        if (!a.equals(b)) {
            throw new IllegalStateException("the two renders differ:\n" + a + "\n" + b);
        }
    }

    @Benchmark
    public String guarded() {
        return guarded.renderMaps(chat, true, Map.of());
    }

    @Benchmark
    public String unguarded() {
        Map<String, Object> vars = new HashMap<>();
        vars.put("messages", chat);
        vars.put("add_generation_prompt", true);
        vars.put("bos_token", "<s>");
        vars.put("eos_token", "</s>");
        return bare.renderForResult(template, vars).getOutput();
    }
}
