# Shared by the adapter test scripts (sourced, not run): start dafsd processes on
# 127.0.0.1:0 and stop them again.
#
#   DAFSD=/path/to/dafsd; WORK=/scratch/dir; pids=()
#   start_dafsd NAME DIR [dafsd args...]   # sets ADDR, SHM (empty without shm), PID;
#                                          # stdout/stderr in $WORK/NAME.out / .err
#   stop_pids                              # SIGTERM every started pid, wait up to 5 s each

start_dafsd() {
    local name=$1 dir=$2
    shift 2
    "$DAFSD" "$dir" --listen 127.0.0.1:0 "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    PID=$!
    disown "$PID" # no job-control chatter when a test kills one
    pids+=("$PID")
    for _ in $(seq 100); do
        grep -q '^dafsd listening on' "$WORK/$name.out" 2>/dev/null && break
        kill -0 "$PID" 2>/dev/null || { cat "$WORK/$name.err" >&2; echo "error: dafsd ($name) exited" >&2; exit 1; }
        sleep 0.1
    done
    ADDR=$(sed -n 's/^dafsd listening on //p' "$WORK/$name.out")
    SHM=$(sed -n 's/^shared memory: //p' "$WORK/$name.out")
    [ -n "$ADDR" ] || { echo "error: dafsd ($name) did not report its address" >&2; exit 1; }
}

stop_pids() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    done
}
