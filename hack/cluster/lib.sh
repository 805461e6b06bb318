# shellcheck shell=bash
# hack/cluster.sh's helpers for everything else: progress and errors, the
# binaries in bin/, and the components as processes (start, stop, wait for).
# Sourced by hack/cluster.sh, which sets ROOT, D, LOGS, PIDS, PKI, TIMEOUT,
# APISERVER and KUBECONFIG_FILE.

# Progress on stderr, with the seconds since the command started.
log() { printf 'cluster: [%3ds] %s\n' "$SECONDS" "$*" >&2; }
die() {
  echo "cluster: error: $*" >&2
  exit 1
}

bin() { readlink -f "$ROOT/bin/$1"; }
kubectl() { "$ROOT/bin/kubectl" --kubeconfig "$KUBECONFIG_FILE" --cache-dir "$D/kubectl-cache" "$@"; }

# start NAME COMMAND...: run COMMAND in its own session with its log in
# logs/NAME.log; pids/NAME.pid records the pid and the executable, so that a
# reused pid is never taken for ours.
start() {
  local name=$1
  shift
  local exe
  exe=$(readlink -f "$(command -v "$1")")
  # 9<&-: the daemons must not inherit the lock.
  setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null 9<&- &
  local pid=$!
  echo "$pid $exe" >"$PIDS/$name.pid"
  # Until the fork has exec'd, /proc/PID/exe is bash's.
  local deadline=$((SECONDS + 10))
  until alive "$name"; do
    if exited "$pid" || ((SECONDS >= deadline)); then
      tail -n 40 "$LOGS/$name.log" >&2
      die "$name did not start ($1)"
    fi
    sleep 0.05
  done
}

# exited PID: the process is gone, or a zombie (files and ports closed).
exited() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 0
  [ -z "$state" ] || [ "${state%% *}" = Z ]
}

# alive NAME: the process pids/NAME.pid records still runs its executable.
alive() {
  local f="$PIDS/$1.pid" pid exe actual
  [ -f "$f" ] || return 1
  read -r pid exe <"$f"
  actual=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [ "${actual% (deleted)}" = "$exe" ]
}

# stop NAME: SIGTERM, SIGKILL after 30s; returns once its files and ports
# are closed (or it is stuck in the kernel, which it logs).
stop() {
  local name=$1 pid exe
  [ -f "$PIDS/$name.pid" ] || return 0
  read -r pid exe <"$PIDS/$name.pid"
  if alive "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while alive "$name" && ((SECONDS < deadline)); do sleep 0.2; done
    if alive "$name"; then
      log "$name ($pid) ignored SIGTERM for 30s, killing it"
      kill -KILL "$pid" 2>/dev/null || true
      deadline=$((SECONDS + 10))
      while alive "$name" && ((SECONDS < deadline)); do sleep 0.1; done
      alive "$name" && log "$name ($pid) survived SIGKILL for 10s (stuck in the kernel?)"
    fi
    # /proc/PID/exe goes before the process has closed its files and ports.
    deadline=$((SECONDS + 10))
    until exited "$pid" || ((SECONDS >= deadline)); do sleep 0.05; done
    log "stopped $name ($pid)"
  fi
  rm -f "$PIDS/$name.pid"
}

# wait_until DESCRIPTION LOGNAME COMMAND...: poll COMMAND until it succeeds.
# Fails after TIMEOUT seconds, or at once when the component LOGNAME exited,
# showing the end of its log.
wait_until() {
  local desc=$1 logname=$2
  shift 2
  local deadline=$((SECONDS + TIMEOUT))
  until "$@" >/dev/null 2>&1; do
    local why=""
    if [ -f "$PIDS/$logname.pid" ] && ! alive "$logname"; then
      why="$logname exited"
    elif ((SECONDS >= deadline)); then
      why="timed out after ${TIMEOUT}s"
    fi
    if [ -n "$why" ]; then
      echo "cluster: error: $why waiting for $desc" >&2
      if [ -f "$LOGS/$logname.log" ]; then
        echo "---- last lines of $LOGS/$logname.log ----" >&2
        tail -n 40 "$LOGS/$logname.log" >&2
      fi
      if [[ $logname == kubelet* ]] && [ -f "$KUBECONFIG_FILE" ]; then
        echo "---- pods and recent events ----" >&2
        kubectl get pods -A -o wide >&2 || true
        kubectl get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -n 20 >&2 || true
      fi
      echo "cluster: logs are in $LOGS; hack/cluster.sh down cleans up" >&2
      return 1
    fi
    sleep 0.5
  done
}

# healthy URL: a component's health endpoint answers 2xx (its serving
# certificate is not checked: the components sign their own).
healthy() { curl -fsSk --max-time 5 "$1"; }

apiserver_ready() {
  curl -fsS --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$APISERVER/readyz"
}

# port_free ADDRESS:PORT: nothing listens there, nor on the port's wildcard.
port_free() {
  ! ss -Hltn "sport = :${1##*:}" | awk '{print $4}' | grep -qxF -e "$1" -e "0.0.0.0:${1##*:}" -e "*:${1##*:}" -e "[::]:${1##*:}"
}
