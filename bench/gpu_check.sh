#!/usr/bin/env bash
# The GPU checks of issue 28 (sft throughput of the three configurations with a profile;
# LoRA and QLoRA trained, reloaded and merged; full SFT resumed after SIGTERM) and issue 25
# (the templates bert-large-qa, llm-sft, llm-lora, llm-sft-fsdp), in one run from the
# repository root:
#
#     bash bench/gpu_check.sh            # on the GPU machine, with .whl carried, $OUT set
#     GPU_CHECK_DRY=1 PYTHON=.venv/bin/python bash bench/gpu_check.sh   # CPU dry run
#
# Each section has its own timeout, cut to what is left of GPU_CHECK_BUDGET (seconds for the
# whole script, default 525) so that the summary is always written: $OUT/<section>.log per
# section, $OUT/summary.json and the summary printed last. Details: bench/gpu_check.py.
set -u
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    HF_DATASETS_OFFLINE=1 TRANSFORMERS_NO_ADVISORY_WARNINGS=1
DRY=${GPU_CHECK_DRY:-0}
export GPU_CHECK_DRY=$DRY
PY=${PYTHON:-python3}
export GPU_CHECK_WORK=${GPU_CHECK_WORK:-/tmp/gpu_check}
export OUT=${OUT:-$GPU_CHECK_WORK/out}
BUDGET=${GPU_CHECK_BUDGET:-525}
[ "$DRY" != 0 ] && BUDGET=${GPU_CHECK_BUDGET:-1500}
START=$(date +%s)
rm -rf "$GPU_CHECK_WORK"
mkdir -p "$GPU_CHECK_WORK" "$OUT"
export HF_DATASETS_CACHE=$GPU_CHECK_WORK/hf_datasets
RC_FILE=$GPU_CHECK_WORK/rc.txt
: >"$RC_FILE"

ts() { date +%H:%M:%S; }
left() { echo $((BUDGET - ($(date +%s) - START))); }

# run NAME LOG PLANNED_SECONDS CMD...: CMD under `timeout`, at most PLANNED_SECONDS and never
# past the budget (keeping RESERVE seconds for the summary); output appended to $OUT/LOG.
RESERVE=20
run() {
    local name=$1 logf=$OUT/$2 planned=$3
    shift 3
    [ "$DRY" != 0 ] && planned=$((planned * 3)) # a shared CPU is slow
    local t
    t=$(($(left) - RESERVE))
    [ "$t" -gt "$planned" ] && t=$planned
    if [ "$t" -lt 15 ]; then
        echo "[$(ts)] SKIP $name: only $(left) s of the budget left" | tee -a "$logf"
        echo "$name skipped" >>"$RC_FILE"
        return 0
    fi
    echo "[$(ts)] START $name (timeout ${t}s, $(left) s of the budget left)" | tee -a "$logf"
    local t0=$(date +%s)
    GPU_CHECK_TIMEOUT=$t timeout -k 5 "$t" "$@" 2>&1 | tee -a "$logf"
    local rc=${PIPESTATUS[0]}
    echo "[$(ts)] END $name rc=$rc after $(($(date +%s) - t0)) s" | tee -a "$logf"
    echo "$name $rc" >>"$RC_FILE"
}

# ---- 0: carried wheels, versions, device
setup() {
    echo "[$(ts)] $(uname -m) $(nproc) cpus; python: $(command -v "$PY")"
    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,clocks.sm,clocks.max.sm \
        --format=csv 2>/dev/null || echo "no nvidia-smi"
    if [ "$DRY" = 0 ] && ls .whl/*.whl >/dev/null 2>&1; then
        echo "[$(ts)] installing $(ls .whl | tr '\n' ' ')"
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl && echo "[$(ts)] installed into /tmp/site"
    else
        echo "[$(ts)] no wheels installed (dry run or no .whl/)"
    fi
}
if [ "$DRY" = 0 ] && [ -d .whl ]; then
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
run setup setup.log 60 bash -c "$(declare -f ts setup); DRY=$DRY PY=$PY setup"
run env setup.log 60 "$PY" bench/gpu_check.py env
run prep setup.log 90 "$PY" bench/gpu_check.py prep

# ---- 1: issue 28 items 1-2: plain / previous defaults / current defaults, profile of the best
if [ "$DRY" = 0 ]; then
    S1_ARGS=(--config auto --warmup 4 --steps 10 --plain-steps 3 --profile-steps 2)
else
    S1_ARGS=(--config tiny --warmup 1 --steps 2 --plain-steps 1 --profile-steps 1)
fi
run throughput s1_throughput.log 235 "$PY" bench/train_throughput.py --task sft --repeats 1 \
    --order new,today,plain --profile-top 15 "${S1_ARGS[@]}" \
    --json "$GPU_CHECK_WORK/s1_throughput.json"

# ---- 2: issue 28 item 3: LoRA and QLoRA (train, adapter reload, merged model)
run lora s2_peft.log 85 "$PY" bench/gpu_check.py peft --mode lora --timeout 80
run qlora s2_peft.log 90 "$PY" bench/gpu_check.py peft --mode qlora --timeout 85

# ---- 3: issue 28 item 4: full SFT (llm-sft's hyperparameters) resumes after SIGTERM
run resume s3_resume.log 130 "$PY" bench/gpu_check.py resume --timeout 125

# ---- 4: issue 25: the templates on the GPU (llm-sft is section 3's run)
run bert-large-qa s4_templates.log 50 "$PY" bench/gpu_check.py template bert-large-qa --timeout 45
run llm-lora s4_templates.log 60 "$PY" bench/gpu_check.py template llm-lora --timeout 55
run llm-sft-fsdp s4_templates.log 70 "$PY" bench/gpu_check.py template llm-sft-fsdp --timeout 65
run bert-large-qa+fp16 s4_templates.log 45 "$PY" bench/gpu_check.py template bert-large-qa \
    --variant fp16 --timeout 40

# ---- summary (always)
RESERVE=0
run summary summary.log 20 "$PY" bench/gpu_check.py summary
echo "[$(ts)] done in $(($(date +%s) - START)) s; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
