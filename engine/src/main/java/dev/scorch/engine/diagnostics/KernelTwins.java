package dev.scorch.engine.diagnostics;

import dev.scorch.engine.checkpoint.NumberFormats;
import dev.scorch.engine.demo.Fp8Blocks;
import dev.scorch.engine.demo.Int4Groups;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.KeyTiles;
import dev.scorch.engine.device.MlaShape;
import dev.scorch.engine.device.MoeShape;
import dev.scorch.engine.device.PackedFp8;
import dev.scorch.engine.device.Rotary;
import dev.scorch.engine.device.host.HostDevice;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * Runs every {@link Device} kernel on the same random inputs on two devices (a GPU and {@link HostDevice}, its
 * plain-loop twin) and reports the largest difference of each kernel's output: the first thing to read when a
 * GPU path disagrees with the CPU.
 */
public final class KernelTwins {
    private KernelTwins() {}

    public static Map<String, Double> compare(Device a, Device b) {
        Map<String, Double> out = new LinkedHashMap<>();
        SplittableRandom rnd = new SplittableRandom(1);
        int m = 37;
        int k = 300;
        int n = 129;
        float[] x = random(rnd, m * k);
        float[] w = random(rnd, n * k);
        for (GemmPrecision p : GemmPrecision.values()) {
            out.put(
                    "gemm " + p,
                    diff(
                            a,
                            b,
                            dev -> {
                                Buf y = dev.alloc(Buf.Kind.F32, (long) m * n);
                                dev.gemm(dev.upload(x), m, k, weightOf(dev, w, n, k, p), n, y, p);
                                return y;
                            },
                            m * n));
        }
        // INT4 weights kept packed (k = 300: a partial last word and group of 32), BF16 scales, in every precision;
        // then
        // F32 scales that are not BF16 values (BF16X3 runs the fp32 GEMM on them).
        Int4Groups q4 = Int4Groups.quantize(w, n, k, 32);
        for (GemmPrecision p : GemmPrecision.values()) {
            out.put(
                    "gemm INT4 " + p,
                    diff(
                            a,
                            b,
                            dev -> {
                                Buf y = dev.alloc(Buf.Kind.F32, (long) m * n);
                                dev.gemm(
                                        dev.upload(x),
                                        m,
                                        k,
                                        dev.int4Weight(q4.packed(), q4.scales(), n, k, 32),
                                        n,
                                        y,
                                        p);
                                return y;
                            },
                            m * n));
        }
        float[] f32Scales = q4.scales().clone();
        for (int i = 0; i < f32Scales.length; i++) {
            f32Scales[i] *= 1.0001f;
        }
        out.put(
                "gemm INT4 F32 scales BF16X3",
                diff(
                        a,
                        b,
                        dev -> {
                            Buf y = dev.alloc(Buf.Kind.F32, (long) m * n);
                            dev.gemm(
                                    dev.upload(x),
                                    m,
                                    k,
                                    dev.int4Weight(q4.packed(), f32Scales, n, k, 32),
                                    n,
                                    y,
                                    GemmPrecision.BF16X3);
                            return y;
                        },
                        m * n));
        // FP8 weights kept as codes ([129, 300]: partial row and column blocks of 128), in every precision with fp32
        // scales (three BF16 parts a weight), then BF16 scales (two) in BF16X3.
        Fp8Blocks q8 = Fp8Blocks.quantize(w, n, k, 128, 128);
        float[] bf16Scales = q8.scaleInv().clone();
        for (int i = 0; i < bf16Scales.length; i++) {
            bf16Scales[i] = NumberFormats.roundToBf16(bf16Scales[i]);
        }
        for (GemmPrecision p : GemmPrecision.values()) {
            out.put(
                    "gemm FP8 " + p,
                    diff(
                            a,
                            b,
                            dev -> {
                                Buf y = dev.alloc(Buf.Kind.F32, (long) m * n);
                                Buf w8 = PackedFp8.upload(dev, q8.codes(), q8.scaleInv(), n, k, 128, 128);
                                dev.gemm(dev.upload(x), m, k, w8, n, y, p);
                                return y;
                            },
                            m * n));
        }
        out.put(
                "gemm FP8 BF16 scales BF16X3",
                diff(
                        a,
                        b,
                        dev -> {
                            Buf y = dev.alloc(Buf.Kind.F32, (long) m * n);
                            Buf w8 = PackedFp8.upload(dev, q8.codes(), bf16Scales, n, k, 128, 128);
                            dev.gemm(dev.upload(x), m, k, w8, n, y, GemmPrecision.BF16X3);
                            return y;
                        },
                        m * n));
        float[] norm = random(rnd, k);
        out.put(
                "rmsNorm",
                diff(
                        a,
                        b,
                        dev -> {
                            Buf o = dev.alloc(Buf.Kind.F32, (long) m * 200);
                            dev.rmsNorm(dev.upload(x), m, k, 50, 200, dev.upload(norm), 1e-6f, o);
                            return o;
                        },
                        m * 200));
        int[] positions = new int[m];
        for (int i = 0; i < m; i++) {
            positions[i] = rnd.nextInt(5000);
        }
        float[] cs = random(rnd, 5000 * 32);
        out.put(
                "rope",
                diff(
                        a,
                        b,
                        dev -> {
                            Buf q = dev.upload(x);
                            dev.rope(q, m, 3, k, 96, 64, 32, new Rotary(dev.upload(positions), dev.upload(cs)));
                            return q;
                        },
                        m * k));
        MlaShape kvA = new MlaShape(1, k - 200 - 32, 0, 32, 0, 200, 1f); // x [m, k] = [q_a | latent 200 | k_pe 32]
        out.put(
                "rmsNormRope",
                diff(
                        a,
                        b,
                        dev -> {
                            Buf o = dev.alloc(Buf.Kind.F32, (long) m * (200 + 32));
                            dev.rmsNormRope(
                                    dev.upload(x),
                                    m,
                                    dev.upload(norm),
                                    1e-6f,
                                    kvA,
                                    new Rotary(dev.upload(positions), dev.upload(cs)),
                                    o.slice(0, m * 200L),
                                    o.slice(m * 200L, m * 32L));
                            return o;
                        },
                        m * (200 + 32)));
        out.put(
                "copyCols",
                diff(
                        a,
                        b,
                        dev -> {
                            Buf o = dev.alloc(Buf.Kind.F32, (long) m * 40);
                            dev.copyCols(dev.upload(x), m, k, 7, 33, o, 40, 5);
                            return o;
                        },
                        m * 40));
        out.put(
                "add+swiglu",
                diff(
                        a,
                        b,
                        dev -> {
                            Buf g = dev.upload(x);
                            dev.add(g, dev.upload(w), (long) m * k);
                            Buf o = dev.alloc(Buf.Kind.F32, (long) m * 150);
                            dev.swiglu(g, m, 150, o);
                            return o;
                        },
                        m * 150));
        int[] rows = {5, 0, 36, 17, 2};
        out.put(
                "gatherRows",
                diff(
                        a,
                        b,
                        dev -> {
                            Buf g = dev.alloc(Buf.Kind.F32, 5L * k);
                            dev.gatherRows(dev.upload(x), dev.upload(rows), 5, k, g);
                            return g;
                        },
                        5 * k));
        out.put(
                "gather BF16 table",
                diff(
                        a,
                        b,
                        dev -> {
                            Buf g = dev.alloc(Buf.Kind.F32, 5L * k);
                            dev.gatherRows(dev.weight(w, GemmPrecision.BF16), dev.upload(rows), 5, k, g);
                            return g;
                        },
                        5 * k));
        // Attention: 2 sequences (20 and 17 tokens, keys = queries), at the small model's head dims and at
        // DeepSeek-V3's.
        int[] keyStart = new int[m];
        int[] keyLen = new int[m];
        for (int i = 0; i < m; i++) {
            keyStart[i] = i < 20 ? 0 : 20;
            keyLen[i] = i < 20 ? i + 1 : i - 19;
        }
        int[] tiles = {0, 16, 16, 4, 20, 16, 36, 1};
        for (int[] dims : new int[][] {{64, 32, 64}, {128, 64, 128}}) {
            int heads = 3;
            int qHead = dims[0] + dims[1];
            MlaShape shape = new MlaShape(heads, 0, dims[0], dims[1], dims[2], 0, 0.1f);
            float[] q = random(rnd, m * heads * qHead);
            float[] kv = random(rnd, m * heads * (dims[0] + dims[2]));
            float[] kPe = random(rnd, m * dims[1]);
            out.put(
                    "mlaAttention " + dims[0] + "+" + dims[1] + "/" + dims[2],
                    diff(
                            a,
                            b,
                            dev -> {
                                Buf o = dev.alloc(Buf.Kind.F32, (long) m * heads * dims[2]);
                                dev.mlaAttention(
                                        dev.upload(q),
                                        dev.upload(kv),
                                        dev.upload(kPe),
                                        new KeyTiles(m, dev.upload(keyStart), dev.upload(keyLen), dev.upload(tiles), 4),
                                        shape,
                                        o);
                                return o;
                            },
                            m * heads * dims[2]));
        }
        // Absorbed (decode) attention over a latent cache: 3 new tokens after 40 cached at the small model's dims with
        // fp32 kv_b_proj, and 1 after 300 (more keys than the CUDA kernel's warps take at once) at DeepSeek-V3's with
        // BF16; the cache a slice that starts past its allocation's first row, as a layer of a GpuKvCache does.
        int[][] decodeDims = {{64, 32, 64, 256, 40, 3}, {128, 64, 128, 512, 300, 1}};
        for (int[] dims : decodeDims) {
            int heads = 3;
            int nope = dims[0];
            int rope = dims[1];
            int v = dims[2];
            int rank = dims[3];
            int past = dims[4];
            int news = dims[5];
            MlaShape shape = new MlaShape(heads, 0, nope, rope, v, rank, 0.07f);
            GemmPrecision p = rank == 256 ? GemmPrecision.FP32 : GemmPrecision.BF16X3;
            float[] q = random(rnd, news * heads * (nope + rope));
            float[] cache = random(rnd, (past + news + 1) * (rank + rope));
            float[] kvB = random(rnd, heads * (nope + v) * rank);
            out.put(
                    "mlaDecode " + nope + "+" + rope + "/" + v + " rank " + rank + " " + p,
                    diff(
                            a,
                            b,
                            dev -> {
                                Buf o = dev.alloc(Buf.Kind.F32, (long) news * heads * v);
                                dev.mlaDecode(
                                        dev.upload(q),
                                        news,
                                        dev.upload(cache).slice(rank + rope, (long) (past + news) * (rank + rope)),
                                        past,
                                        dev.weight(kvB, p),
                                        shape,
                                        o);
                                return o;
                            },
                            news * heads * v));
        }
        // A decode step's absorbed attention and cache append, lengths and caches read on the device: three rows over
        // caches of 40, 300 and 1 tokens, each a slice of one allocation (as the layers of GpuKvCaches), found through
        // an address table.
        int[] stepPast = {40, 300, 1};
        for (int[] dims : decodeDims) {
            int heads = 3;
            int nope = dims[0];
            int rope = dims[1];
            int v = dims[2];
            int rank = dims[3];
            int width = rank + rope;
            int cap = 302;
            MlaShape shape = new MlaShape(heads, 0, nope, rope, v, rank, 0.07f);
            GemmPrecision p = rank == 256 ? GemmPrecision.FP32 : GemmPrecision.BF16X3;
            float[] q = random(rnd, 3 * heads * (nope + rope));
            float[] cache = random(rnd, 3 * cap * width);
            float[] kvB = random(rnd, heads * (nope + v) * rank);
            float[] latent = random(rnd, 3 * rank);
            float[] kPe = random(rnd, 3 * rope);
            java.util.function.Function<Device, Buf[]> step = dev -> {
                Buf all = dev.upload(cache);
                Buf table = dev.alloc(Buf.Kind.ADDR, 3);
                dev.writeAddresses(table, new Buf[] {
                    all.slice(2L * cap * width, (long) cap * width),
                    all.slice(0, (long) cap * width),
                    all.slice((long) cap * width, (long) cap * width)
                });
                Buf lengths = dev.upload(stepPast);
                dev.cacheAppend(dev.upload(latent), dev.upload(kPe), 3, shape, table, lengths);
                Buf o = dev.alloc(Buf.Kind.F32, 3L * heads * v);
                dev.mlaDecodeRows(dev.upload(q), 3, table, lengths, dev.weight(kvB, p), shape, o);
                return new Buf[] {all, o};
            };
            String name = nope + "+" + rope + "/" + v + " rank " + rank;
            out.put("cacheAppend " + name, diff(a, b, dev -> step.apply(dev)[0], 3 * cap * width));
            out.put("mlaDecodeRows " + name + " " + p, diff(a, b, dev -> step.apply(dev)[1], 3 * heads * v));
        }
        // Grouped GEMMs: three groups of 5, 12 and 9 rows, packed (5, 12, 20 rows apart) and at a uniform stride of 12
        // rows (padding a device may compute); only the groups' own rows are compared.
        int[][] layouts = {{0, 5, 17}, {0, 12, 24}};
        int[] gRows = {5, 12, 9};
        float[][] gw = {random(rnd, n * k), random(rnd, n * k), random(rnd, n * k)};
        for (int[] gStart : layouts) {
            int[] valid = new int[26];
            for (int g = 0, v = 0; g < 3; g++) {
                for (int i = 0; i < gRows[g]; i++) {
                    valid[v++] = gStart[g] + i;
                }
            }
            for (GemmPrecision p : new GemmPrecision[] {GemmPrecision.BF16X3, GemmPrecision.FP32}) {
                out.put(
                        "gemmGrouped " + p + (gStart[1] == 12 ? " strided" : " packed"),
                        diff(
                                a,
                                b,
                                dev -> {
                                    Buf y = dev.alloc(Buf.Kind.F32, (long) m * n);
                                    Buf[] ws = {dev.weight(gw[0], p), dev.weight(gw[1], p), dev.weight(gw[2], p)};
                                    dev.gemmGrouped(dev.upload(x), gStart, gRows, k, ws, n, y, p);
                                    Buf rowsOut = dev.alloc(Buf.Kind.F32, 26L * n);
                                    dev.gatherRows(y, dev.upload(valid), 26, n, rowsOut);
                                    return rowsOut;
                                },
                                26 * n));
            }
        }
        // INT4 and FP8 experts in the packed layout: each expert's weight dequantised before its GEMM.
        Int4Groups[] g4 = {
            Int4Groups.quantize(gw[0], n, k, 32),
            Int4Groups.quantize(gw[1], n, k, 32),
            Int4Groups.quantize(gw[2], n, k, 32)
        };
        Fp8Blocks[] g8 = {
            Fp8Blocks.quantize(gw[0], n, k, 128, 128),
            Fp8Blocks.quantize(gw[1], n, k, 128, 128),
            Fp8Blocks.quantize(gw[2], n, k, 128, 128)
        };
        Map<String, java.util.function.BiFunction<Device, Integer, Buf>> expertWeights = new LinkedHashMap<>();
        expertWeights.put("INT4", (dev, g) -> dev.int4Weight(g4[g].packed(), g4[g].scales(), n, k, 32));
        expertWeights.put("FP8", (dev, g) -> PackedFp8.upload(dev, g8[g].codes(), g8[g].scaleInv(), n, k, 128, 128));
        int[] packedStart = layouts[0];
        int[] packedValid = new int[26];
        for (int i = 0; i < 26; i++) {
            packedValid[i] = i;
        }
        for (Map.Entry<String, java.util.function.BiFunction<Device, Integer, Buf>> e : expertWeights.entrySet()) {
            for (GemmPrecision p : new GemmPrecision[] {GemmPrecision.BF16X3, GemmPrecision.FP32}) {
                out.put(
                        "gemmGrouped " + e.getKey() + " " + p,
                        diff(
                                a,
                                b,
                                dev -> {
                                    Buf y = dev.alloc(Buf.Kind.F32, (long) m * n);
                                    Buf[] ws = new Buf[3];
                                    for (int g = 0; g < 3; g++) {
                                        ws[g] = e.getValue().apply(dev, g);
                                    }
                                    dev.gemmGrouped(dev.upload(x), packedStart, gRows, k, ws, n, y, p);
                                    Buf rowsOut = dev.alloc(Buf.Kind.F32, 26L * n);
                                    dev.gatherRows(y, dev.upload(packedValid), 26, n, rowsOut);
                                    return rowsOut;
                                },
                                26 * n));
            }
        }
        int[] slot = new int[12 * 3];
        float[] sw = random(rnd, 12 * 3);
        for (int i = 0; i < slot.length; i++) {
            slot[i] = rnd.nextInt(m);
        }
        out.put(
                "moeCombine",
                diff(
                        a,
                        b,
                        dev -> {
                            Buf y = dev.alloc(Buf.Kind.F32, 12L * k);
                            dev.moeCombine(dev.upload(x), dev.upload(slot), dev.upload(sw), 12, 3, k, null, y);
                            return y;
                        },
                        12 * k));
        out.put(
                "moeCombine + shared",
                diff(
                        a,
                        b,
                        dev -> {
                            Buf y = dev.alloc(Buf.Kind.F32, 12L * k);
                            Buf shared = dev.upload(w).slice(0, 12L * k);
                            dev.moeCombine(dev.upload(x), dev.upload(slot), dev.upload(sw), 12, 3, k, shared, y);
                            return y;
                        },
                        12 * k));
        experts(a, b, rnd, out);
        MoeShape r = MoeShape.router(64, 6, 8, 3, true, 2.5f);
        float[] logits = random(rnd, m * 64);
        float[] bias = random(rnd, 64);
        java.util.function.Function<Device, Buf[]> route = dev -> { // {experts, weights}
            Buf e = dev.alloc(Buf.Kind.I32, (long) m * 6);
            Buf wt = dev.alloc(Buf.Kind.F32, (long) m * 6);
            dev.moeRoute(dev.upload(logits), dev.upload(bias), m, r, e, wt);
            return new Buf[] {e, wt};
        };
        out.put("moeRoute weights", diff(a, b, dev -> route.apply(dev)[1], m * 6));
        out.put("moeRoute experts", intDiff(a, b, dev -> route.apply(dev)[0], m * 6));
        int vocab = 5000;
        float[] big = random(rnd, 4 * vocab);
        int[] targets = {3, -1, 4999, 0};
        out.put(
                "logSoftmaxStats",
                diff(
                        a,
                        b,
                        dev -> {
                            Buf s = dev.alloc(Buf.Kind.F32, 12);
                            dev.logSoftmaxStats(dev.upload(big), 4, vocab, dev.upload(targets), s);
                            return s;
                        },
                        12));
        return out;
    }

    /**
     * The MoE permutation and the experts' grouped GEMMs on a routing of 80 tokens, top 4 of 40 experts: every token
     * picks expert 5 (80 rows, more than one CUDA row tile) and 3 of experts 0 to 11, so experts 12 to 39 get none.
     * Weights [129, 300] (partial column and k tiles) dense in each precision, INT4 and FP8; gate|up [2 · 70, 300]
     * through the SwiGLU form.
     */
    private static void experts(Device a, Device b, SplittableRandom rnd, Map<String, Double> out) {
        int t = 80;
        int topK = 4;
        int nExperts = 40;
        int pairs = t * topK;
        int k = 300;
        int n = 129;
        int inter = 70;
        int[] route = new int[pairs];
        for (int i = 0; i < t; i++) {
            java.util.TreeSet<Integer> chosen = new java.util.TreeSet<>(java.util.List.of(5));
            while (chosen.size() < topK) {
                chosen.add(rnd.nextInt(12));
            }
            int c = 0;
            for (int e : chosen) {
                route[i * topK + c++] = e;
            }
        }
        out.put(
                "moePermute",
                intDiff(
                        a,
                        b,
                        dev -> {
                            Buf all = dev.alloc(Buf.Kind.I32, nExperts + 1L + 2L * pairs);
                            dev.moePermute(
                                    dev.upload(route),
                                    t,
                                    topK,
                                    nExperts,
                                    all.slice(0, nExperts + 1L),
                                    all.slice(nExperts + 1L, pairs),
                                    all.slice(nExperts + 1L + pairs, pairs));
                            return all;
                        },
                        nExperts + 1 + 2 * pairs));
        float[] xs = random(rnd, pairs * k);
        float[][] ws = new float[12][];
        float[][] gus = new float[12][];
        for (int e = 0; e < 12; e++) {
            ws[e] = random(rnd, n * k);
            gus[e] = random(rnd, 2 * inter * k);
        }
        // experts 12 to 39 get no rows: they share expert 0's weight
        java.util.function.BiFunction<Device, java.util.function.IntFunction<Buf>, Buf[]> stack = (dev, one) -> {
            Buf[] s = new Buf[nExperts];
            for (int e = 0; e < nExperts; e++) {
                s[e] = e < 12 ? one.apply(e) : s[0];
            }
            return s;
        };
        java.util.function.Function<Device, Buf> offsets = dev -> {
            Buf o = dev.alloc(Buf.Kind.I32, nExperts + 1L);
            Buf ints = dev.alloc(Buf.Kind.I32, 2L * pairs);
            dev.moePermute(dev.upload(route), t, topK, nExperts, o, ints.slice(0, pairs), ints.slice(pairs, pairs));
            return o;
        };
        Int4Groups[] q4 = new Int4Groups[12];
        Fp8Blocks[] q8 = new Fp8Blocks[12];
        for (int e = 0; e < 12; e++) {
            q4[e] = Int4Groups.quantize(ws[e], n, k, 32);
            q8[e] = Fp8Blocks.quantize(ws[e], n, k, 128, 128);
        }
        for (GemmPrecision p : GemmPrecision.values()) {
            java.util.Map<String, java.util.function.BiFunction<Device, Integer, Buf>> formats = new LinkedHashMap<>();
            formats.put("", (dev, e) -> dev.weight(ws[e], p));
            formats.put("INT4 ", (dev, e) -> dev.int4Weight(q4[e].packed(), q4[e].scales(), n, k, 32));
            formats.put("FP8 ", (dev, e) -> PackedFp8.upload(dev, q8[e].codes(), q8[e].scaleInv(), n, k, 128, 128));
            for (Map.Entry<String, java.util.function.BiFunction<Device, Integer, Buf>> f : formats.entrySet()) {
                out.put(
                        "gemmExperts " + f.getKey() + p,
                        diff(
                                a,
                                b,
                                dev -> {
                                    Buf y = dev.alloc(Buf.Kind.F32, (long) pairs * n);
                                    Buf[] w = stack.apply(dev, e -> f.getValue().apply(dev, e));
                                    dev.gemmExperts(dev.upload(xs), offsets.apply(dev), pairs, k, w, n, y, p);
                                    return y;
                                },
                                pairs * n));
            }
        }
        for (GemmPrecision p : new GemmPrecision[] {GemmPrecision.BF16X3, GemmPrecision.FP32}) {
            out.put(
                    "gemmExpertsSwiglu " + p,
                    diff(
                            a,
                            b,
                            dev -> {
                                Buf y = dev.alloc(Buf.Kind.F32, (long) pairs * inter);
                                Buf[] w = stack.apply(dev, e -> dev.weight(gus[e], p));
                                dev.gemmExpertsSwiglu(dev.upload(xs), offsets.apply(dev), pairs, k, w, inter, y, p);
                                return y;
                            },
                            pairs * inter));
        }
    }

    private static Buf weightOf(Device dev, float[] w, int n, int k, GemmPrecision p) {
        return dev.weight(w, p);
    }

    private static float[] random(SplittableRandom rnd, int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) (rnd.nextDouble() * 2 - 1);
        }
        return v;
    }

    private static double diff(Device a, Device b, java.util.function.Function<Device, Buf> f, int n) {
        float[] ra = new float[n];
        float[] rb = new float[n];
        a.read(f.apply(a), ra, 0, n);
        b.read(f.apply(b), rb, 0, n);
        double d = 0;
        for (int i = 0; i < n; i++) {
            d = Math.max(d, Math.abs(ra[i] - rb[i]));
        }
        return d;
    }

    private static double intDiff(Device a, Device b, java.util.function.Function<Device, Buf> f, int n) {
        int[] ra = new int[n];
        int[] rb = new int[n];
        a.read(f.apply(a), ra, 0, n);
        b.read(f.apply(b), rb, 0, n);
        int bad = 0;
        for (int i = 0; i < n; i++) {
            bad += ra[i] != rb[i] ? 1 : 0;
        }
        return bad;
    }
}
