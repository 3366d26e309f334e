# Shared by bin/scorch and dev/jmh (sourced, not run).

# The newest JDK: $JAVA_HOME, else the newest JDK 21+ installed under /usr/lib/jvm, else `java`.
# Scorch's jars target Java 17, so any of them runs them.
pick_java() {
  if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then
    echo "$JAVA_HOME/bin/java"; return
  fi
  local best="" best_v=0 j v
  for j in /usr/lib/jvm/*/bin/java; do
    [[ -x "$j" ]] || continue
    v="$(java_feature "$j")"
    [[ "$v" =~ ^[0-9]+$ ]] || continue
    if (( v >= 21 && v > best_v )); then best="$j"; best_v="$v"; fi
  done
  echo "${best:-java}"
}

# The Java feature version (17, 21, 25, ...) of the java command $1; empty when it does not say.
java_feature() {
  "$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p'
}

# Scorch's JVM flags into the array jvm_flags: the file the build writes (jobs/target/classes/scorch-jvm.flags),
# else the scorch.jvm.flags property of the parent pom.
read_jvm_flags() {
  local root="$1"
  local flags_file="$root/jobs/target/classes/scorch-jvm.flags"
  if [[ -f "$flags_file" ]]; then
    read -r -a jvm_flags < "$flags_file"
  else
    read -r -a jvm_flags <<< "$(sed -n 's:.*<scorch.jvm.flags>\(.*\)</scorch.jvm.flags>.*:\1:p' "$root/pom.xml")"
  fi
}

# Makes folder $1 the output folder of tool $2: refused (exit 2) when it exists, is not empty and holds no marker
# .$2 (a folder the tool did not make may be the user's, and the tool overwrites files in it); else created and marked.
claim_out_dir() {
  local dir="$1" tool="$2"
  if [[ -e "$dir" && ! -f "$dir/.$tool" ]] && [[ -n "$(ls -A "$dir" 2>/dev/null)" ]]; then
    echo "$tool: $dir exists and was not written by $tool (no .$tool marker): choose another folder" >&2
    exit 2
  fi
  mkdir -p "$dir"
  touch "$dir/.$tool"
}
