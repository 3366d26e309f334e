package dev.scorch.engine.tokenizer;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.AuxCounters;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

/**
 * DeepSeek-V3 encode/decode speed on one thread over a few MB of generated mixed text (English prose, code,
 * CJK, emoji, numbers), cut into documents of {@code docChars} characters. The {@code tokens} counter is
 * tokens per second; the primary score is documents per second. Run: {@code dev/jmh TokenizerBenchmark}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Threads(1)
@Fork(
        value = 1,
        jvmArgsAppend = {"-Xmx4g"})
@Warmup(iterations = 3, time = 3)
@Measurement(iterations = 5, time = 3)
public class TokenizerBenchmark {
    /** Characters per document. */
    @Param({"2000"})
    public int docChars;

    /** Total corpus size in characters. */
    @Param({"4000000"})
    public int corpusChars;

    private HfTokenizer tokenizer;
    private List<String> docs;
    private List<int[]> encoded;
    private int next;

    /** Tokens processed, reported by JMH as a rate (tokens/s). */
    @State(Scope.Thread)
    @AuxCounters(AuxCounters.Type.OPERATIONS)
    public static class Counters {
        public long tokens;
    }

    @Setup(Level.Trial)
    public void setUp() {
        tokenizer = DeepSeekV3TokenizerTest.deepSeek();
        String corpus = corpus(corpusChars, 2026);
        docs = new ArrayList<>();
        encoded = new ArrayList<>();
        long tokens = 0;
        for (int i = 0; i < corpus.length(); i += docChars) {
            int end = Math.min(corpus.length(), i + docChars);
            if (end < corpus.length() && Character.isHighSurrogate(corpus.charAt(end - 1))) {
                end++;
            }
            String doc = corpus.substring(i, end);
            docs.add(doc);
            int[] ids = tokenizer.encode(doc, false);
            encoded.add(ids);
            tokens += ids.length;
            i = end - docChars;
        }
        System.out.printf(
                "%ncorpus: %d chars, %d docs, %d tokens (%.2f chars/token)%n",
                corpus.length(), docs.size(), tokens, corpus.length() / (double) tokens);
    }

    @Benchmark
    public int[] encode(Counters c) {
        String doc = docs.get(next);
        next = next + 1 == docs.size() ? 0 : next + 1;
        int[] ids = tokenizer.encode(doc, false);
        c.tokens += ids.length;
        return ids;
    }

    @Benchmark
    public String decode(Counters c) {
        int[] ids = encoded.get(next);
        next = next + 1 == encoded.size() ? 0 : next + 1;
        c.tokens += ids.length;
        return tokenizer.decode(ids, false);
    }

    /** Deterministic mixed text: prose, code, CJK, emoji, numbers, in random paragraphs. */
    static String corpus(int chars, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        String[] words = ("the of and to in is that for it as was with be by on not he this are or his from at which "
                        + "but have an they you were her she there been one all we their has would when if so no will more can "
                        + "model token sequence attention layer expert gradient inference Spark partition executor cluster "
                        + "tokenizer throughput latency memory Kubernetes JSON Parquet dataset evaluation benchmark naïve café "
                        + "résumé coöperate über Straße")
                .split(" ");
        String[] code = {
            "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }\n",
            "def forward(self, x):\n    return self.proj(torch.relu(x)) + x  # residual\n",
            "SELECT user_id, COUNT(*) AS n FROM events WHERE ts >= '2026-01-01' GROUP BY user_id;\n",
            "const res = await fetch(`https://api.example.com/v1/items?page=${page}`);\n",
            "if err != nil {\n\treturn nil, fmt.Errorf(\"read %s: %w\", path, err)\n}\n",
            "{\"id\": 12345, \"name\": \"widget\", \"tags\": [\"a\", \"b\"], \"price\": 19.99}\n",
        };
        String cjk = "我们今天讨论自然语言处理的模型推理性能以及分布式计算框架中的数据分区问题这是一个非常有意思的话题" + "日本語のテキストも少し含まれていますカタカナとひらがなの混合です한국어문장도있습니다";
        String[] emoji = {"🚀", "🔥", "👍🏽", "😀", "🇫🇷", "✅", "🎉", "❤️", "🤖", "📈"};
        StringBuilder sb = new StringBuilder(chars + 256);
        while (sb.length() < chars) {
            switch (rnd.nextInt(5)) {
                case 0, 1 -> { // English prose
                    int n = 20 + rnd.nextInt(60);
                    for (int i = 0; i < n; i++) {
                        String w = words[rnd.nextInt(words.length)];
                        sb.append(i == 0 ? Character.toUpperCase(w.charAt(0)) + w.substring(1) : w);
                        sb.append(rnd.nextInt(12) == 0 ? ", " : " ");
                    }
                    sb.setLength(sb.length() - 1);
                    sb.append(".\n\n");
                }
                case 2 -> sb.append(code[rnd.nextInt(code.length)]);
                case 3 -> { // CJK with punctuation
                    int n = 10 + rnd.nextInt(40);
                    int at = rnd.nextInt(cjk.length() - n);
                    sb.append(cjk, at, at + n)
                            .append(rnd.nextBoolean() ? "。" : "，")
                            .append('\n');
                }
                default -> { // numbers and emoji
                    sb.append("Total: ")
                            .append(rnd.nextInt(1_000_000))
                            .append('.')
                            .append(rnd.nextInt(100))
                            .append(" USD ");
                    sb.append(emoji[rnd.nextInt(emoji.length)]).append(emoji[rnd.nextInt(emoji.length)]);
                    sb.append(" on 2026-")
                            .append(1 + rnd.nextInt(12))
                            .append('-')
                            .append(1 + rnd.nextInt(28))
                            .append('\n');
                }
            }
        }
        return sb.toString();
    }
}
