#!/usr/bin/env bash
# Compiles Scorch's CPU micro-kernels (scorch_cpu.c, scorch_bf16.c, scorch_attention.c, scorch_vecmath.c; JNI) into a shared library
# the engine jar carries, for x86-64 Linux. Run by Maven (engine's generate-resources phase) with the output folder and
# the JDK whose include/ has jni.h. Without a C compiler, or on another platform, the jar is built without it and
# PackedGemm, the attention and the vector math run their Java Vector API code (the same bits, slower).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/scorch_cpu.c"
attention="$here/scorch_attention.c"
vecmath="$here/scorch_vecmath.c"
bf16="$here/scorch_bf16.c"
out_dir="$1"
java_home="$2"
out="$out_dir/libscorch_cpu.so"
# CC names the compiler; CC=none builds without the native kernel even where a compiler exists.
cc="${CC:-$(command -v cc || command -v gcc || true)}"
if [[ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]]; then
  echo "[scorch] native CPU kernel NOT built: only for Linux x86-64 (PackedGemm runs its Java kernel)"
  rm -f "$out"
  exit 0
fi
if [[ -z "$cc" || "$cc" == none || ! -f "$java_home/include/jni.h" ]]; then
  echo "[scorch] C compiler or jni.h not found: native CPU kernel NOT built (PackedGemm runs its Java kernel)"
  rm -f "$out"
  exit 0
fi
mkdir -p "$out_dir"
if [[ -f "$out" && "$out" -nt "$src" && "$out" -nt "$attention" && "$out" -nt "$vecmath" && "$out" -nt "$bf16" && "$out" -nt "$here/scorch_cpu.h" && "$out" -nt "$here/scorch_decode.h" \
      && "$out" -nt "$here/scorch_exp.h" && "$out" -nt "$here/scorch_jni.h" && "$out" -nt "$0" ]]; then
  echo "[scorch] native CPU kernel up to date: $out"
  exit 0
fi
# No -ffast-math and no contraction: every FMA stays in the Java kernels' order, and no multiply and add are fused that
# Java keeps apart. Each function carries its own target("avx2,fma"), target("avx512f") or target("avx512f,avx512bf16").
"$cc" -O3 -std=c11 -ffp-contract=off -fPIC -shared -Wall -Werror -I"$java_home/include" -I"$java_home/include/linux" \
  -o "$out" "$src" "$attention" "$vecmath" "$bf16"
echo "[scorch] native CPU kernel built with $("$cc" --version | head -1): $out"
