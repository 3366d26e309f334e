package dev.scorch.jobs.lmeval;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** Every expected value here is CPython 3's output (3.10, 3.11 and 3.13 agree), embedded as a literal. */
class PyRandomTest {
    private static List<Integer> range(int n) {
        return IntStream.range(0, n).boxed().toList();
    }

    private static double[] first3(PyRandom r) {
        return new double[] {r.random(), r.random(), r.random()};
    }

    @Test
    void randomMatchesCPythonForSmallNegativeAndMultiWordSeeds() {
        // CPython: [random.Random(s).random() for _ in range(3)]
        assertEquals(List.of(0.8444218515250481, 0.7579544029403025, 0.420571580830845), box(first3(new PyRandom(0))));
        assertEquals(List.of(0.13436424411240122, 0.8474337369372327, 0.763774618976614), box(first3(new PyRandom(1))));
        assertEquals(
                List.of(0.6394267984578837, 0.025010755222666936, 0.27502931836911926), box(first3(new PyRandom(42))));
        assertEquals(
                List.of(0.9664535356921388, 0.4407325991753527, 0.007491470058587191), box(first3(new PyRandom(1234))));
        // a negative seed is seeded by its absolute value
        assertEquals(
                List.of(0.32383276483316237, 0.15084917392450192, 0.6509344730398537), box(first3(new PyRandom(-7))));
        // 2**40 + 3: two 32-bit key words
        assertEquals(
                List.of(0.21978710637116716, 0.5494687768352203, 0.09461190973523603),
                box(first3(new PyRandom((1L << 40) + 3))));
        // 2**64 + 1: three key words
        assertEquals(
                List.of(0.10175875467846374, 0.7248101788369984, 0.2507269822084962),
                box(first3(new PyRandom(BigInteger.ONE.shiftLeft(64).add(BigInteger.ONE)))));
    }

    @Test
    void getrandbitsRandbelowRandintShuffle() {
        PyRandom r = new PyRandom(1234);
        long[] bits = {
            r.getrandbits(1),
            r.getrandbits(7),
            r.getrandbits(31),
            r.getrandbits(32),
            r.getrandbits(33),
            r.getrandbits(63)
        };
        // CPython: [random.Random(1234).getrandbits(k) for k in (1, 7, 31, 32, 33, 63)] (one generator)
        assertEquals(List.of(1L, 99L, 946466063L, 501869158L, 32175636L, 8693348754041190512L), boxL(bits));

        PyRandom b = new PyRandom(5);
        long[] below = {
            b.randbelow(1),
            b.randbelow(2),
            b.randbelow(3),
            b.randbelow(10),
            b.randbelow(1000),
            b.randbelow(Integer.MAX_VALUE)
        };
        assertEquals(List.of(0L, 1L, 2L, 8L, 29L, 1804633855L), boxL(below));

        PyRandom i = new PyRandom(9);
        List<Long> ints = new ArrayList<>();
        for (int k = 0; k < 8; k++) ints.add(i.randint(-3, 17));
        assertEquals(List.of(11L, 16L, 8L, 5L, 1L, 2L, -3L, 7L), ints);
        List<Long> ranges = new ArrayList<>();
        for (int k = 0; k < 5; k++) ranges.add(i.randrange(5, 9));
        assertEquals(List.of(8L, 5L, 7L, 5L, 8L), ranges);

        List<Integer> l = new ArrayList<>(range(10));
        new PyRandom(3).shuffle(l);
        assertEquals(List.of(1, 5, 6, 0, 9, 4, 7, 2, 8, 3), l);
    }

    @Test
    void sampleUsesCPythonsPoolOrSetAlgorithm() {
        // CPython: random.Random(seed).sample(range(n), k)
        assertEquals(List.of(3, 0), new PyRandom(1234).sample(range(5), 2));
        assertEquals(List.of(7, 1, 0, 9, 4), new PyRandom(1234).sample(range(10), 5));
        assertEquals(List.of(99, 56, 14, 0, 11), new PyRandom(1234).sample(range(100), 5));
        assertEquals(List.of(24, 14, 3, 0, 2, 18), new PyRandom(1234).sample(range(30), 6));
        assertEquals(List.of(989, 796, 451, 119, 7, 92), new PyRandom(1234).sample(range(1000), 6));
        // k <= 5: set size 21; n = 21 takes the pool, n = 22 the set (same draws here by chance of small k)
        assertEquals(List.of(12, 13, 1), new PyRandom(0).sample(range(21), 3));
        assertEquals(List.of(12, 13, 1), new PyRandom(0).sample(range(22), 3));
        // k = 7: set size 21 + 4**3 = 85; n = 85 pool, n = 86 set, and the draws part ways
        assertEquals(85, PyRandom.setSize(7));
        assertEquals(List.of(41, 19, 50, 6, 9, 68, 12), new PyRandom(7).sample(range(85), 7));
        assertEquals(List.of(41, 19, 50, 83, 6, 9, 68), new PyRandom(7).sample(range(86), 7));
        List<Integer> big = new PyRandom(99).sample(range(200), 150);
        assertEquals(List.of(103, 97, 51, 153, 45, 58, 63, 34, 22, 64), big.subList(0, 10));
        assertEquals(List.of(189, 19, 77, 155, 15, 12, 119, 18, 37, 130), big.subList(100, 110));
        assertEquals(List.of(140, 173, 134, 123, 184, 14, 188, 143), big.subList(142, 150));
    }

    @Test
    void choicesAndStringSeeds() {
        // CPython: random.Random(0).choices(range(7), k=12)
        assertEquals(List.of(5, 5, 2, 1, 3, 2, 5, 2, 3, 4, 6, 3), new PyRandom(0).choices(range(7), 12));
        // CPython: r = random.Random("hello"); r.random(); r.sample(range(50), 4)
        PyRandom s = PyRandom.ofString("hello");
        assertEquals(0.3537754404730722, s.random());
        assertEquals(List.of(42, 48, 35, 7), s.sample(range(50), 4));
    }

    @Test
    void manySeedsAndSizesAgreeWithLivePython() {
        String script = String.join(
                "\n",
                "import random",
                "for s in list(range(40)) + [1234, -99, 2**33 + 17, 2**70 + 5]:",
                "    for n, k in [(1,1),(3,2),(6,5),(10,6),(22,5),(30,10),(84,7),(85,7),(86,7),(200,66),(200,67),(1000,400),(5000,3)]:",
                "        r = random.Random(s)",
                "        a = r.sample(range(n), k)",
                "        b = r.choices(range(n), k=5)",
                "        c = list(range(n)); r.shuffle(c)",
                "        print(s, n, k, ' '.join(map(str, a)), '|', ' '.join(map(str, b)), '|', ' '.join(map(str, c[:8])), '|', repr(r.random()), r.getrandbits(45))");
        String[] lines = Python3.run(script).strip().split("\n");
        assertEquals(44 * 13, lines.length);
        for (String line : lines) {
            String[] parts = line.split(" \\| ");
            String[] head = parts[0].split(" ");
            BigInteger seed = new BigInteger(head[0]);
            int n = Integer.parseInt(head[1]);
            int k = Integer.parseInt(head[2]);
            PyRandom r = new PyRandom(seed);
            StringBuilder got = new StringBuilder(head[0] + " " + n + " " + k);
            for (int x : r.sample(range(n), k)) got.append(' ').append(x);
            got.append(" |");
            for (int x : r.choices(range(n), 5)) got.append(' ').append(x);
            got.append(" |");
            List<Integer> c = new ArrayList<>(range(n));
            r.shuffle(c);
            for (int x : c.subList(0, Math.min(8, n))) got.append(' ').append(x);
            String[] tail = parts[3].split(" ");
            assertEquals(parts[0] + " | " + parts[1] + " | " + parts[2], got.toString());
            assertEquals(Double.parseDouble(tail[0]), r.random(), 0.0, "seed " + seed + " n " + n + " k " + k);
            assertEquals(Long.parseLong(tail[1]), r.getrandbits(45));
        }
    }

    private static List<Double> box(double[] xs) {
        List<Double> out = new ArrayList<>();
        for (double x : xs) out.add(x);
        return out;
    }

    private static List<Long> boxL(long[] xs) {
        List<Long> out = new ArrayList<>();
        for (long x : xs) out.add(x);
        return out;
    }
}
