# etcd for federation tests and benchmarks (sourced, not run). The project starts and
# stops its own etcd: a temporary data directory, free ports on 127.0.0.1, and the
# short heartbeat/election timings that let 1-second leases expire promptly.
#
#   ensure_etcd                      # install etcd-server (and curl, python3) if missing
#   WORK=/scratch/dir; pids=()
#   start_etcd NAME                  # sets ETCD_ENDPOINT (127.0.0.1:PORT), ETCD_PID;
#                                    # data in $WORK/NAME.etcd, log in $WORK/NAME.etcd.log
#   stop_pids                        # (lib-dafsd.sh) stops it with the dafsd processes
#
# Debian's package also enables an etcd service on 127.0.0.1:2379; nothing here uses
# that one, so tests never share state with it.

ensure_etcd() {
    local need=() sudo=""
    command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
    command -v curl >/dev/null 2>&1 || need+=(curl)       # readiness probe
    command -v python3 >/dev/null 2>&1 || need+=(python3) # free_port
    [ ${#need[@]} -eq 0 ] && return 0
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "==> installing Debian packages: ${need[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
}

# A free TCP port on 127.0.0.1 (the kernel's choice; racy only against other binders).
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

start_etcd() {
    local name=$1 client peer
    client=$(free_port)
    peer=$(free_port)
    etcd --name "$name" --data-dir "$WORK/$name.etcd" \
        --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
        --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "$name=http://127.0.0.1:$peer" \
        --heartbeat-interval 10 --election-timeout 100 >"$WORK/$name.etcd.log" 2>&1 &
    ETCD_PID=$!
    disown "$ETCD_PID"
    pids+=("$ETCD_PID")
    ETCD_ENDPOINT=127.0.0.1:$client
    for _ in $(seq 200); do
        curl -fs -X POST -d '{"key":"AA=="}' "http://$ETCD_ENDPOINT/v3/kv/range" >/dev/null 2>&1 && return 0
        kill -0 "$ETCD_PID" 2>/dev/null || { tail -20 "$WORK/$name.etcd.log" >&2; echo "error: etcd ($name) exited" >&2; exit 1; }
        sleep 0.1
    done
    echo "error: etcd ($name) did not answer on $ETCD_ENDPOINT within 20 s" >&2
    exit 1
}
