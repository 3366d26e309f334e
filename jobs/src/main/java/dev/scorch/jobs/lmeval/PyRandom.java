package dev.scorch.jobs.lmeval;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * CPython's {@code random.Random}, bit for bit, for the calls lm-eval makes: its few-shot sampler
 * ({@code sample}) and its bootstrap ({@code choices}). The generator is MT19937; seeding, the 53-bit
 * {@code random()}, {@code getrandbits}, the rejection-sampling {@code _randbelow} and the selection
 * algorithms follow CPython 3's, so a seed gives the same draws here as there. Not thread-safe.
 */
public final class PyRandom {
    private static final int N = 624;
    private static final int M = 397;
    private static final int MATRIX_A = 0x9908b0df;
    private static final int UPPER_MASK = 0x80000000;
    private static final int LOWER_MASK = 0x7fffffff;

    private final int[] mt = new int[N];
    private int mti = N + 1;

    /** Seeded as CPython's {@code random.Random(seed)} with an int seed. */
    public PyRandom(long seed) {
        seed(BigInteger.valueOf(seed));
    }

    /** Seeded as CPython's {@code random.Random(seed)} with an int seed of any size. */
    public PyRandom(BigInteger seed) {
        seed(seed);
    }

    /** Seeded as CPython's {@code random.Random(seed)} with a str seed (version 2: the UTF-8 bytes and their SHA-512). */
    public static PyRandom ofString(String seed) {
        byte[] utf8 = seed.getBytes(StandardCharsets.UTF_8);
        byte[] digest;
        try {
            digest = MessageDigest.getInstance("SHA-512").digest(utf8);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        byte[] all = new byte[utf8.length + digest.length];
        System.arraycopy(utf8, 0, all, 0, utf8.length);
        System.arraycopy(digest, 0, all, utf8.length, digest.length);
        return new PyRandom(new BigInteger(1, all));
    }

    /** CPython's seeding from an int: init_by_array over the absolute value's 32-bit words, least significant first. */
    private void seed(BigInteger seed) {
        BigInteger n = seed.abs();
        int words = Math.max(1, (n.bitLength() + 31) / 32);
        int[] key = new int[words];
        for (int i = 0; i < words; i++) {
            key[i] = n.shiftRight(32 * i).intValue();
        }
        initByArray(key);
    }

    private void initGenrand(int s) {
        mt[0] = s;
        for (mti = 1; mti < N; mti++) {
            mt[mti] = 1812433253 * (mt[mti - 1] ^ (mt[mti - 1] >>> 30)) + mti;
        }
    }

    private void initByArray(int[] key) {
        initGenrand(19650218);
        int i = 1;
        int j = 0;
        for (int k = Math.max(N, key.length); k > 0; k--) {
            mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >>> 30)) * 1664525)) + key[j] + j;
            i++;
            j++;
            if (i >= N) {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if (j >= key.length) {
                j = 0;
            }
        }
        for (int k = N - 1; k > 0; k--) {
            mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >>> 30)) * 1566083941)) - i;
            i++;
            if (i >= N) {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x80000000;
    }

    /** The next 32 bits of MT19937, as an unsigned value in an int. */
    private int genrand() {
        int y;
        if (mti >= N) {
            int kk;
            for (kk = 0; kk < N - M; kk++) {
                y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
                mt[kk] = mt[kk + M] ^ (y >>> 1) ^ ((y & 1) != 0 ? MATRIX_A : 0);
            }
            for (; kk < N - 1; kk++) {
                y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
                mt[kk] = mt[kk + (M - N)] ^ (y >>> 1) ^ ((y & 1) != 0 ? MATRIX_A : 0);
            }
            y = (mt[N - 1] & UPPER_MASK) | (mt[0] & LOWER_MASK);
            mt[N - 1] = mt[M - 1] ^ (y >>> 1) ^ ((y & 1) != 0 ? MATRIX_A : 0);
            mti = 0;
        }
        y = mt[mti++];
        y ^= (y >>> 11);
        y ^= (y << 7) & 0x9d2c5680;
        y ^= (y << 15) & 0xefc60000;
        y ^= (y >>> 18);
        return y;
    }

    /** {@code random()}: a double in [0, 1) from 53 bits (27 + 26). */
    public double random() {
        int a = genrand() >>> 5;
        int b = genrand() >>> 6;
        return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
    }

    /** {@code getrandbits(k)} for 0 <= k <= 63: 32-bit words, least significant first, the last one's top bits kept. */
    public long getrandbits(int k) {
        if (k < 0 || k > 63) {
            throw new IllegalArgumentException("getrandbits: k must be in [0, 63], got " + k);
        }
        if (k == 0) {
            return 0;
        }
        if (k <= 32) {
            return Integer.toUnsignedLong(genrand()) >>> (32 - k);
        }
        long low = Integer.toUnsignedLong(genrand());
        long high = Integer.toUnsignedLong(genrand()) >>> (64 - k);
        return (high << 32) | low;
    }

    /** {@code _randbelow(n)}, n > 0: getrandbits(n.bit_length()) until the draw is below n. */
    public long randbelow(long n) {
        if (n <= 0) {
            throw new IllegalArgumentException("randbelow: n must be > 0, got " + n);
        }
        int k = 64 - Long.numberOfLeadingZeros(n);
        long r = getrandbits(k);
        while (r >= n) {
            r = getrandbits(k);
        }
        return r;
    }

    /** {@code randrange(start, stop)}: start + _randbelow(stop - start). */
    public long randrange(long start, long stop) {
        long width = stop - start;
        if (width <= 0) {
            throw new IllegalArgumentException("empty range in randrange(" + start + ", " + stop + ")");
        }
        return start + randbelow(width);
    }

    /** {@code randint(a, b)}: randrange(a, b + 1). */
    public long randint(long a, long b) {
        return randrange(a, b + 1);
    }

    /** {@code shuffle(x)} in place: for i from len-1 down to 1, swap x[i] with x[_randbelow(i + 1)]. */
    public <T> void shuffle(List<T> x) {
        for (int i = x.size() - 1; i > 0; i--) {
            int j = (int) randbelow(i + 1L);
            Collections.swap(x, i, j);
        }
    }

    /**
     * {@code sample(population, k)}: k distinct positions in selection order. Like CPython, a pool (partial
     * Fisher-Yates over a copy) when n is at most the size of a k-element set, else rejection against a set of
     * chosen indexes; the two consume the generator differently, so the rule for choosing matters.
     */
    public <T> List<T> sample(List<T> population, int k) {
        int n = population.size();
        if (k < 0 || k > n) {
            throw new IllegalArgumentException("Sample larger than population or is negative: k=" + k + ", n=" + n);
        }
        List<T> result = new ArrayList<>(k);
        if (n <= setSize(k)) {
            List<T> pool = new ArrayList<>(population);
            for (int i = 0; i < k; i++) {
                int j = (int) randbelow(n - i);
                result.add(pool.get(j));
                pool.set(j, pool.get(n - i - 1));
            }
        } else {
            Set<Integer> selected = new HashSet<>();
            for (int i = 0; i < k; i++) {
                int j = (int) randbelow(n);
                while (selected.contains(j)) {
                    j = (int) randbelow(n);
                }
                selected.add(j);
                result.add(population.get(j));
            }
        }
        return result;
    }

    /** CPython's threshold: 21, plus 4 ** ceil(log(3k, 4)) when k > 5. */
    static long setSize(int k) {
        long size = 21;
        if (k > 5) {
            size += (long) Math.pow(4, Math.ceil(Math.log(k * 3.0) / Math.log(4)));
        }
        return size;
    }

    /** {@code choices(population, k=k)} without weights: population[floor(random() * n)], k times. */
    public <T> List<T> choices(List<T> population, int k) {
        double n = population.size();
        List<T> result = new ArrayList<>(k);
        for (int i = 0; i < k; i++) {
            result.add(population.get((int) Math.floor(random() * n)));
        }
        return result;
    }

    /** {@link #choices} over doubles, without boxing: the bootstrap's resample. */
    public double[] choices(double[] population, int k) {
        double n = population.length;
        double[] result = new double[k];
        for (int i = 0; i < k; i++) {
            result[i] = population[(int) Math.floor(random() * n)];
        }
        return result;
    }
}
