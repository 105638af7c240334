#!/usr/bin/env bash
# Smoke run of every fuzz target: build them all, then run each for
# ${FUZZ_SECONDS:-30} seconds on its committed corpus, one after another.
# Exits non-zero if the build fails or any target crashes, leaks, times out or
# runs out of memory (libFuzzer then leaves the input in fuzz/artifacts/<target>/).
#
# Works with only the stable toolchain: RUSTC_BOOTSTRAP=1 lets stable rustc take
# the -Z sanitizer flags cargo-fuzz passes. Installs cargo-fuzz when missing.
#
#   FUZZ_SECONDS   seconds per target (default 30)
#   FUZZ_TARGETS   space-separated subset (default: all, from `cargo fuzz list`)
#   FUZZ_SANITIZER address (default) or none
#   FUZZ_NICE      prefix for build and run commands (default "nice -n 19")
#
# New inputs the runs find go to a scratch directory, not to the committed
# corpus (which is only read).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${FUZZ_SECONDS:-30}"
sanitizer="${FUZZ_SANITIZER:-address}"
read -r -a nice_cmd <<<"${FUZZ_NICE-nice -n 19}"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "==> installing cargo-fuzz"
    "${nice_cmd[@]}" cargo install cargo-fuzz --locked
fi

if [[ -n "${FUZZ_TARGETS:-}" ]]; then
    read -r -a targets <<<"$FUZZ_TARGETS"
else
    mapfile -t targets < <(cargo fuzz list)
fi

# The input-layout dictionary of each target.
dict_for() {
    case "$1" in
        pa_jwt | delegation_token) echo fuzz/dicts/jwt.dict ;;
        oauth_form) echo fuzz/dicts/form.dict ;;
        user_code) echo fuzz/dicts/user_code.dict ;;
        *) echo fuzz/dicts/json.dict ;;
    esac
}

start=$SECONDS
echo "==> building ${#targets[@]} targets (sanitizer: $sanitizer)"
"${nice_cmd[@]}" cargo fuzz build --sanitizer "$sanitizer"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
failed=()
for target in "${targets[@]}"; do
    echo "==> $target: ${seconds}s"
    mkdir -p "$scratch/$target" "fuzz/corpus/$target"
    # The scratch dir comes first, so new inputs land there; the committed corpus is only read.
    if ! "${nice_cmd[@]}" cargo fuzz run --sanitizer "$sanitizer" "$target" \
        "$scratch/$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
        -dict="$(dict_for "$target")" -print_final_stats=1 \
        >"$scratch/$target.log" 2>&1; then
        failed+=("$target")
        tail -n 40 "$scratch/$target.log"
    fi
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb):' \
        "$scratch/$target.log" | sed 's/^/    /' || true
done

echo "==> done in $((SECONDS - start))s"
if ((${#failed[@]} > 0)); then
    echo "FAILED: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
echo "all ${#targets[@]} targets ran without a crash"
