import java.io.File;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.ToLongFunction;

/**
 * Two builds of Scorch side by side in one JVM (dev/ab-paired runs it): each jar in its own class loader, its own model
 * and engine threads, and the two taking turns slice by slice (A B, then B A), so a slow spell of a shared machine hits
 * both sides of a pair. A slice is one call of the jar's own benchmark with one untimed run (each call starts a new
 * workspace, whose first pass allocates its buffers) and one timed run: decode (DecodeBenchmark: BATCH random
 * prompts of 64 tokens, or -Dab.prompt, prefilled, then N decode steps) or prefill (PrefillBenchmark: one scoring pass of BATCH random sequences of N
 * tokens). Prints every pair and the median of the per-pair ratios B/A.
 *
 * <p>Processes taking turns (dev/ab-report) see this machine's speed drift by 10–20 % between runs a few seconds apart;
 * here a pair's two slices are a second apart. The two jars share the page cache of the one model folder.
 */
public final class AbBench {
    public static void main(String[] args) throws Exception {
        if (args.length != 9 || !(args[4].equals("decode") || args[4].equals("prefill"))) {
            System.err.println("usage: AbBench JAR_A JAR_B MODEL THREADS decode|prefill BATCH STEPS|SEQ PAIRS AB|BA");
            System.exit(2);
        }
        Path model = Path.of(args[2]);
        int threads = Integer.parseInt(args[3]);
        boolean decode = args[4].equals("decode");
        int batch = Integer.parseInt(args[5]);
        int steps = Integer.parseInt(args[6]); // decode steps, or prefill's sequence length
        int pairs = Integer.parseInt(args[7]);
        // The side loaded first may fare differently (JIT, memory placement): callers alternate the order by launch.
        boolean aLoadsFirst = args[8].equals("AB");
        Side first = aLoadsFirst ? new Side("A", Path.of(args[0]), model, threads, decode) : new Side("B", Path.of(args[1]), model, threads, decode);
        Side second = aLoadsFirst ? new Side("B", Path.of(args[1]), model, threads, decode) : new Side("A", Path.of(args[0]), model, threads, decode);
        Side a = aLoadsFirst ? first : second;
        Side b = aLoadsFirst ? second : first;
        for (int w = 0; w < 4; w++) { // JIT warm-up of both, taking turns to go first
            (w % 2 == 0 ? a : b).slice(batch, steps, w);
            (w % 2 == 0 ? b : a).slice(batch, steps, w);
        }
        double[] ratio = new double[pairs];
        double[] ta = new double[pairs];
        double[] tb = new double[pairs];
        for (int p = 0; p < pairs; p++) {
            boolean aFirst = p % 2 == 0;
            double x = aFirst ? a.slice(batch, steps, 100 + p) : b.slice(batch, steps, 100 + p);
            double y = aFirst ? b.slice(batch, steps, 100 + p) : a.slice(batch, steps, 100 + p);
            ta[p] = aFirst ? x : y;
            tb[p] = aFirst ? y : x;
            ratio[p] = tb[p] / ta[p];
            System.out.printf("pair %d: A %.1f, B %.1f tokens/s, B/A %.3f%n", p, ta[p], tb[p], ratio[p]);
        }
        System.out.printf(
                "%s batch %d, %s %d, %d threads, %d pairs, %s loaded first: A %.1f, B %.1f tokens/s (medians);"
                        + " B/A median %.3f (quartiles %.3f to %.3f)%n",
                args[4], batch, decode ? "steps" : "seq", steps, threads, pairs, aLoadsFirst ? "A" : "B", median(ta), median(tb), median(ratio), quantile(ratio, 0.25),
                quantile(ratio, 0.75));
    }

    static double median(double[] v) {
        return quantile(v, 0.5);
    }

    static double quantile(double[] v, double q) {
        double[] s = v.clone();
        Arrays.sort(s);
        double i = q * (s.length - 1);
        int lo = (int) Math.floor(i);
        int hi = (int) Math.ceil(i);
        return s[lo] + (s[hi] - s[lo]) * (i - lo);
    }

    /** One jar: its class loader, model and CpuOps, and its benchmark's run found by reflection. */
    static final class Side {
        final Object model;
        final Object ops;
        final Method run;
        final Method tokensPerSec;
        final boolean decode;

        Side(String label, Path jar, Path modelDir, int threads, boolean decode) throws Exception {
            this.decode = decode;
            List<URL> urls = new ArrayList<>();
            urls.add(jar.toUri().toURL());
            String base = jar.toString().replaceFirst("\\.jar$", "");
            for (String suffix : new String[] {".classpath.txt", ".classpath-provided.txt"}) {
                Path cp = Path.of(base + suffix);
                if (Files.exists(cp)) {
                    for (String e : Files.readString(cp).trim().split(File.pathSeparator)) {
                        urls.add(Path.of(e).toUri().toURL());
                    }
                }
            }
            ClassLoader loader = new URLClassLoader(label, urls.toArray(new URL[0]), AbBench.class.getClassLoader());
            // The native library is one file per content, and one file loads into one class loader only.
            Path nativeDir = Files.createTempDirectory("ab-native-" + label);
            System.setProperty("scorch.native.dir", nativeDir.toString());
            Class.forName("dev.scorch.engine.kernels.NativeCpu", true, loader);
            Class<?> selection = Class.forName("dev.scorch.engine.kernels.KernelSelection", true, loader);
            Object kernels = selection.getMethod("current").invoke(null);
            // Loaded (or refused) by now: the copy is not needed on disk, and a killed launch leaves nothing behind.
            try (var files = Files.list(nativeDir)) {
                for (Path f : files.toList()) {
                    Files.delete(f);
                }
            }
            Files.delete(nativeDir);
            System.out.println(label + " kernels: " + selection.getMethod("describe").invoke(kernels));
            Class<?> modelClass = Class.forName("dev.scorch.engine.model.DeepseekV3Model", true, loader);
            model = modelClass.getMethod("load", Path.class).invoke(null, modelDir);
            Class<?> opsClass = Class.forName("dev.scorch.engine.kernels.CpuOps", true, loader);
            ops = opsClass.getConstructor(int.class).newInstance(threads);
            String name = decode ? "DecodeBenchmark" : "PrefillBenchmark";
            Class<?> bench = Class.forName("dev.scorch.engine.bench." + name, true, loader);
            Method found = null;
            for (Method m : bench.getMethods()) {
                // decode: run(..., bytesOf) in older builds, run(..., bytesOf, untilJitQuiet) since
                if (m.getName().equals("run")
                        && (decode
                                ? m.getParameterCount() >= 9
                                        && m.getParameterCount() <= 10
                                        && m.getParameterTypes()[8] == ToLongFunction.class
                                : m.getParameterCount() == 7)) {
                    found = m;
                }
            }
            if (found == null) {
                throw new IllegalStateException(jar + ": no " + name + ".run of the known form");
            }
            run = found;
            tokensPerSec = run.getReturnType().getMethod("medianTokensPerSec");
        }

        double slice(int batch, int n, long seed) throws Exception {
            ToLongFunction<Object> noBytes = spec -> 0L;
            int prompt = Integer.getInteger("ab.prompt", 64);
            Object r = !decode
                    ? run.invoke(null, model, ops, batch, n, 1, 1, seed)
                    : run.getParameterCount() == 9
                            ? run.invoke(null, model, ops, batch, prompt, n, 1, 1, seed, noBytes)
                            : run.invoke(null, model, ops, batch, prompt, n, 1, 1, seed, noBytes, false);
            return (double) tokensPerSec.invoke(r);
        }
    }
}
