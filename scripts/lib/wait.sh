#!/usr/bin/env bash
# Waiting for a background process to be ready: the one way every script that starts
# one does it (sourced by quickstart.sh and topology.sh).
#
# A busy machine may take seconds to even start a process, so nothing here assumes its
# log exists or says anything yet: each helper polls until the process shows it is ready,
# fails at once (showing the log's tail) if the process exited, and gives up after
# ARCHIVIST_WAIT_S seconds (default 120) with a message naming what it waited for.

# The deadline in seconds, read at each call (so `ARCHIVIST_WAIT_S=300 some_wait ...`
# works after sourcing).
wait_deadline_s() { echo "${ARCHIVIST_WAIT_S:-120}"; }

# wait_fail PID LOG WHAT: says why the wait failed, with the end of the log.
wait_fail() {
    local pid=$1 log=$2 what=$3
    if kill -0 "$pid" 2>/dev/null; then
        echo "gave up after $(wait_deadline_s)s waiting for $what (pid $pid still running; set ARCHIVIST_WAIT_S to wait longer); log $log:" >&2
    else
        echo "the process exited before $what (pid $pid); log $log:" >&2
    fi
    if [[ -f $log ]]; then tail -n 20 "$log" >&2; else echo "  (no log written)" >&2; fi
    return 1
}

# wait_for_log_value PID LOG SED_SCRIPT WHAT: prints the first non-empty output of
# `sed -n SED_SCRIPT LOG` once the process has written it (the log may not exist yet).
wait_for_log_value() {
    local pid=$1 log=$2 script=$3 what=$4 value deadline=$((SECONDS + $(wait_deadline_s)))
    while :; do
        if [[ -f $log ]]; then
            value=$(sed -n "$script" "$log" 2>/dev/null | head -n 1) || value=
            if [[ -n $value ]]; then
                printf '%s\n' "$value"
                return 0
            fi
        fi
        kill -0 "$pid" 2>/dev/null || { wait_fail "$pid" "$log" "$what"; return 1; }
        ((SECONDS < deadline)) || { wait_fail "$pid" "$log" "$what"; return 1; }
        sleep 0.2
    done
}

# wait_for_http PID LOG URL WHAT: waits until URL answers 2xx (e.g. a daemon's /readyz).
wait_for_http() {
    local pid=$1 log=$2 url=$3 what=$4 deadline=$((SECONDS + $(wait_deadline_s)))
    while :; do
        curl -fsS --max-time 5 "$url" >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || { wait_fail "$pid" "$log" "$what"; return 1; }
        ((SECONDS < deadline)) || { wait_fail "$pid" "$log" "$what"; return 1; }
        sleep 0.2
    done
}
