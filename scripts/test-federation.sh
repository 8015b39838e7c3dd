#!/usr/bin/env bash
# Federated DAFS end to end: real dafsd processes on 127.0.0.2-4 forming one cluster
# with membership in a private etcd that this script starts and stops. Checks the
# namespace union (one listing over every node, each file in exactly one export),
# WRONG_NODE and epoch refresh while a node joins under load (no client error), a
# node killed (only its names fail, promptly) and restarted (they are back), and the
# admin view. Prints "N passed, N failed"; exits non-zero if anything failed.
set -u
cd "$(dirname "$0")/.."
. scripts/lib-dafsd.sh
. scripts/lib-etcd.sh
ensure_etcd

cargo build -q -p dafs-cli --bins -p dafs-client --example cluster_load || exit 1
DAFSD=$PWD/target/debug/dafsd
DAFS=$PWD/target/debug/dafs
LOAD=$PWD/target/debug/examples/cluster_load
WORK=$(mktemp -d)
pids=()
trap 'stop_pids; rm -rf "$WORK"' EXIT

passed=0
failed=0
check() { # NAME COMMAND...
    local name=$1
    shift
    if "$@" >"$WORK/check.out" 2>&1; then
        passed=$((passed + 1))
        echo "ok   $name"
    else
        failed=$((failed + 1))
        echo "FAIL $name"
        sed 's/^/     /' "$WORK/check.out" | tail -20
    fi
}

start_etcd fed
cat >"$WORK/cluster.toml" <<EOF
[cluster]
etcd = "http://$ETCD_ENDPOINT"
name = "fedtest"
lease_ttl_s = 3
etcd_timeout_ms = 500
EOF
URL="dafs+etcd://$ETCD_ENDPOINT/fedtest/"
export DAFS_REQUEST_DEADLINE_MS=4000

declare -A NODE_PID NODE_ADDR
node_start() { # NAME IP: dafsd on IP:free port, its own export and admin socket
    local name=$1 ip=$2 port
    mkdir -p "$WORK/$name.export"
    port=${NODE_PORT[$name]:-$(free_port)}
    NODE_PORT[$name]=$port
    "$DAFSD" "$WORK/$name.export" --listen "$ip:$port" --node-id "$name" --no-shm \
        --cluster "$WORK/cluster.toml" --admin-socket "$WORK/$name.admin.sock" \
        >"$WORK/$name.out" 2>"$WORK/$name.err" &
    NODE_PID[$name]=$!
    disown "${NODE_PID[$name]}"
    pids+=("${NODE_PID[$name]}")
    NODE_ADDR[$name]="$ip:$port"
    for _ in $(seq 100); do
        grep -q '^cluster: joined' "$WORK/$name.out" 2>/dev/null && return 0
        kill -0 "${NODE_PID[$name]}" 2>/dev/null || break
        sleep 0.1
    done
    cat "$WORK/$name.err" >&2
    echo "error: node $name did not join" >&2
    exit 1
}
declare -A NODE_PORT

# Where a path lives: the names of the nodes whose exports hold it.
holders() {
    local n out=""
    for n in a b c; do
        [ -e "$WORK/$n.export/$1" ] && out="$out$n"
    done
    echo "$out"
}

node_start a 127.0.0.2
node_start b 127.0.0.3

# --- namespace union -----------------------------------------------------------------
union() {
    "$DAFS" mkdir "${URL}u" || return 1
    [ "$(holders u)" = ab ] || { echo "directory u on: $(holders u)"; return 1; }
    for i in $(seq 40); do echo "file $i" | "$DAFS" put - "${URL}u/f$i" || return 1; done
    local i h a=0 b=0
    for i in $(seq 40); do
        h=$(holders "u/f$i")
        case $h in a) a=$((a + 1)) ;; b) b=$((b + 1)) ;; *) echo "u/f$i on '$h'"; return 1 ;; esac
        [ "$("$DAFS" cat "${URL}u/f$i")" = "file $i" ] || return 1
    done
    echo "spread a=$a b=$b"
    [ "$a" -gt 5 ] && [ "$b" -gt 5 ] || return 1
    [ "$("$DAFS" ls "${URL}u" | sort | uniq | wc -l)" -eq 40 ] || return 1
    [ "$("$DAFS" ls "${URL}u" | wc -l)" -eq 40 ] # merged, no duplicates
}
check "namespace union over 2 nodes (40 files, each in exactly one export)" union

rmdir_anywhere() {
    "$DAFS" rmdir "${URL}u" 2>"$WORK/rmdir.err" && { echo "rmdir of a full directory succeeded"; return 1; }
    grep -qi "not empty" "$WORK/rmdir.err" || { cat "$WORK/rmdir.err"; return 1; }
    for i in $(seq 40); do "$DAFS" rm "${URL}u/f$i" || return 1; done
    "$DAFS" rmdir "${URL}u" && [ -z "$(holders u)" ]
}
check "rmdir refuses a directory non-empty on any node, then removes it everywhere" rmdir_anywhere

# --- a node joins under load ---------------------------------------------------------
"$DAFS" mkdir "${URL}load"
"$LOAD" "$URL" load 8 >"$WORK/load.out" 2>"$WORK/load.err" &
load_pid=$!
sleep 2
node_start c 127.0.0.4
wait "$load_pid"
join_under_load() {
    cat "$WORK/load.out"
    grep -m3 -A3 panicked "$WORK/load.err"; tail -3 "$WORK/load.err"
    read -r _ ops _ errors _ e1 _ e2 _ refreshes <"$WORK/load.out"
    [ "$errors" -eq 0 ] && [ "$ops" -gt 20 ] && [ "$e2" -gt "$e1" ]
}
check "a node joins under load: epoch moves, no client error, kept files all found" join_under_load
new_names_on_c() {
    for i in $(seq 30); do echo "c $i" | "$DAFS" put - "${URL}cn$i" || return 1; done
    local on_c=0 i
    for i in $(seq 30); do [ "$(holders "cn$i")" = c ] && on_c=$((on_c + 1)); done
    echo "$on_c of 30 new names on the new node"
    [ "$on_c" -gt 2 ]
}
check "the new node gets its share of new names" new_names_on_c
admin_view() {
    "$DAFS" admin --socket "$WORK/a.admin.sock" cluster | tee "$WORK/admin.txt"
    grep -q '^\*.* a ' "$WORK/admin.txt" || grep -q '^\* *a ' "$WORK/admin.txt" || return 1
    [ "$(grep -cE '^ *\*? +[abc] ' "$WORK/admin.txt")" -eq 3 ] || return 1
    grep -q '^names_checked' "$WORK/admin.txt"
}
check "dafs admin cluster shows members, epoch and counters" admin_view

# --- node loss and return ------------------------------------------------------------
c_name=""
for i in $(seq 30); do [ "$(holders "cn$i")" = c ] && { c_name=cn$i; break; }; done
a_name=""
for i in $(seq 30); do [ "$(holders "cn$i")" = a ] && { a_name=cn$i; break; }; done
kill -9 "${NODE_PID[c]}"
node_loss() {
    local t0 t1
    t0=$(date +%s)
    if "$DAFS" cat "${URL}$c_name" >/dev/null 2>"$WORK/loss.err"; then
        echo "read of $c_name on the dead node succeeded"
        return 1
    fi
    t1=$(date +%s)
    cat "$WORK/loss.err"
    grep -q "unavailable" "$WORK/loss.err" || return 1
    [ $((t1 - t0)) -le 15 ] || { echo "took $((t1 - t0)) s"; return 1; }
    [ "$("$DAFS" cat "${URL}$a_name")" = "c ${a_name#cn}" ]
}
check "a killed node fails only its own names, with a clear error, promptly" node_loss
node_start c 127.0.0.4
check "the restarted node serves its names again" \
    bash -c "[ \"\$('$DAFS' cat '${URL}$c_name')\" = 'c ${c_name#cn}' ]"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
