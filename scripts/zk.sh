#!/usr/bin/env bash
# Local ZooKeeper for development, tests and the quickstart.
#
#   scripts/zk.sh start [tls] [sasl]   standalone server on 127.0.0.1:$ZK_PORT (default 2181)
#   scripts/zk.sh stop | status
#   scripts/zk.sh ensemble start [tls] [sasl]
#                                  3-node ensemble on loopback: client ports
#                                  $ZK_ENSEMBLE_BASE+1..3 (default 22181..22183), quorum
#                                  ports base+11..13, election ports base+21..23
#   scripts/zk.sh ensemble stop | status
#   scripts/zk.sh ensemble kill N  SIGKILL node N (1..3)
#   scripts/zk.sh ensemble restart N
#   scripts/zk.sh ensemble leader  prints the node number that is leader
#   scripts/zk.sh connect-string [ensemble]
#   scripts/zk.sh cli [tls] [sasl] [-- ARGS]
#                                  zkCli (ZooKeeperMain) against $ZK_SERVER (default
#                                  127.0.0.1:$ZK_PORT) with TLS (client certificate of the
#                                  pki) and/or SASL as $ZK_CLI_USER (default archivist);
#                                  ARGS is one command (`-- ls /`), else interactive.
#                                  Debian's zkCli.sh lacks netty on its classpath and so
#                                  cannot speak TLS; this is the java command that can.
#   scripts/zk.sh pki              makes (once) and prints the directory of certificates
#                                  and SASL secrets
#
# Secured modes (or ZK_SECURITY=tls,sasl): `tls` serves clients on a TLS-only port
# (secureClientPort, no plaintext port at all) with ssl.clientAuth=$ZK_TLS_CLIENT_AUTH
# (default need), and in an ensemble encrypts the quorum and election traffic too
# (sslQuorum, mutual TLS with the server certificate); `sasl` enforces SASL DIGEST-MD5 (enforce.auth.enabled: the server
# closes sessions that did not authenticate). Certificates (openssl), the JAAS file and
# the secrets are made locally under $ARCHIVIST_LOCAL/zk/pki; ZK_TLS_SERVER_CERT=expired
# serves an expired certificate (for tests). A restarted node keeps its security.
#
# Installs Debian's `zookeeper` package (3.8) if it is missing. Everything it writes
# (config, data, logs, pid files) lives under $ARCHIVIST_LOCAL (default: <repo>/.local).
# Every start prints the connect string on stdout as its last line.
# ZK_HEAP (default 2g) is each server's Java heap: the benchmarks keep thousands of
# requests in flight and the test suite builds many trees, and a server near its heap
# limit spends its time in garbage collection (512m ran out in the transitions benchmark).
# ZK_TICK_MS (500), ZK_INIT_LIMIT (20) and ZK_SYNC_LIMIT (10) set the timing (ZooKeeper's
# sample configuration has 2000, 10 and 5); SERVER_JVMFLAGS adds JVM flags.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
local_dir=${ARCHIVIST_LOCAL:-$repo/.local}
port=${ZK_PORT:-2181}
heap=${ZK_HEAP:-2g}
ensemble_base=${ZK_ENSEMBLE_BASE:-22180}
tick_ms=${ZK_TICK_MS:-500}
init_limit=${ZK_INIT_LIMIT:-20}
sync_limit=${ZK_SYNC_LIMIT:-10}
client_auth=${ZK_TLS_CLIENT_AUTH:-need}
server_cert=${ZK_TLS_SERVER_CERT:-server}
pki=$local_dir/zk/pki
# The largest request or response a server accepts (4 MiB). It is a Java system property
# the server reads at start: as a zoo.cfg line it would become `zookeeper.jute.maxbuffer`,
# which the server ignores.
jute_maxbuffer=4194304
classpath="/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar:/usr/share/java/netty-common.jar:/usr/share/java/netty-buffer.jar:/usr/share/java/netty-codec.jar:/usr/share/java/netty-handler.jar:/usr/share/java/netty-resolver.jar:/usr/share/java/netty-transport.jar:/usr/share/java/netty-transport-native-unix-common.jar:/usr/share/java/netty-transport-native-epoll.jar:/usr/share/java/jline.jar:/usr/share/java/commons-cli.jar:/usr/share/java/metrics-core.jar:/usr/share/java/snappy-java.jar"

log() { echo "zk.sh: $*" >&2; }

ensure_installed() {
    if [[ -f /usr/share/java/zookeeper.jar ]] && command -v java >/dev/null; then
        return
    fi
    log "installing Debian's zookeeper package"
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq zookeeper >/dev/null
}

# four-letter word against a client port; prints the answer (empty if none)
flw() {
    local p=$1 word=$2
    { exec 3<>"/dev/tcp/127.0.0.1/$p"; } 2>/dev/null || return 0
    printf '%s' "$word" >&3
    timeout 2 cat <&3 || true
    exec 3>&- 3<&- || true
}

# the same over TLS (a secured port speaks nothing else), as the test client certificate
flw_tls() {
    local p=$1 word=$2
    printf '%s' "$word" | timeout 3 openssl s_client -quiet -connect "127.0.0.1:$p" \
        -CAfile "$pki/ca.pem" -cert "$pki/client.pem" -key "$pki/client.key" 2>/dev/null || true
}

# a four-letter word in whatever the port speaks
flw_any() {
    if [[ -f $local_dir/zk/tls-ports/$1 ]]; then flw_tls "$@"; else flw "$@"; fi
}

serving() { flw_any "$1" srvr | grep -q '^Mode:'; }

wait_serving() {
    local p=$1 what=$2
    for _ in $(seq 1 150); do
        if serving "$p"; then return 0; fi
        sleep 0.1
    done
    log "$what did not start serving on 127.0.0.1:$p within 15 s; log follows"
    tail -n 30 "$3" >&2 || true
    return 1
}

start_node() { # dir cfg logfile
    local dir=$1 cfg=$2 logfile=$3
    if [[ -f $dir/pid ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
        return 0
    fi
    local flags=("-Djute.maxbuffer=$jute_maxbuffer")
    if [[ -f $dir/jaas.conf ]]; then
        flags+=("-Djava.security.auth.login.config=$dir/jaas.conf")
    fi
    # shellcheck disable=SC2206 # several flags, split on spaces
    flags+=(${SERVER_JVMFLAGS:-})
    nohup java "-Xmx$heap" -Dzookeeper.root.logger=INFO,CONSOLE -Dzookeeper.log.dir="$dir" \
        "${flags[@]}" -cp "$classpath" org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg" \
        >"$logfile" 2>&1 </dev/null &
    echo $! >"$dir/pid"
}

# --- secured modes -------------------------------------------------------------------

security=${ZK_SECURITY:-}
parse_security() { # words after `start`
    local w
    for w in "$@"; do
        case $w in
            tls | sasl) security="${security:+$security,}$w" ;;
            *) log "unknown security mode $w (tls, sasl)"; exit 2 ;;
        esac
    done
}
has() { [[ ,$security, == *,$1,* ]]; }

# A test CA, a server certificate for 127.0.0.1 (only: `localhost` is a mismatch), an expired one, a client
# certificate and a CA nobody trusts; made once with openssl, reused by every server.
# The SASL secrets are made here too.
make_pki() {
    [[ -f $pki/done ]] && return 0
    command -v openssl >/dev/null || { log "openssl is needed for tls"; exit 1; }
    # Servers started at once (secured tests run in parallel on a fresh clone) must not
    # make it twice: one makes it under the lock, the others wait and reuse it.
    mkdir -p "$local_dir/zk"
    local lock
    exec {lock}>"$local_dir/zk/pki.lock"
    flock "$lock"
    if [[ ! -f $pki/done ]]; then
        rm -rf "$pki"
        make_pki_now
    fi
    flock -u "$lock"
    exec {lock}>&-
}

make_pki_now() {
    mkdir -p "$pki"
    (
        cd "$pki"
        umask 077
        local subj="/O=Archivist test"
        for ca in ca rogue-ca; do
            openssl req -x509 -newkey rsa:2048 -nodes -keyout "$ca.key" -out "$ca.pem" -days 3650 \
                -subj "$subj/CN=$ca" -addext basicConstraints=critical,CA:true \
                -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
        done
        printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >server.ext
        printf 'subjectAltName=DNS:archivist\nextendedKeyUsage=clientAuth\n' >client.ext
        for who in server client expired; do
            openssl req -newkey rsa:2048 -nodes -keyout "$who.key.rsa" -out "$who.csr" \
                -subj "$subj/CN=${who/expired/server}" 2>/dev/null
            openssl pkcs8 -topk8 -nocrypt -in "$who.key.rsa" -out "$who.key"
            rm -f "$who.key.rsa"
        done
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 \
            -extfile server.ext -out server.pem 2>/dev/null
        openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 \
            -extfile client.ext -out client.pem 2>/dev/null
        # `openssl ca` takes explicit validity dates (`x509 -days` cannot go back in time).
        mkdir -p expired-ca
        : >expired-ca/index.txt
        echo 1000 >expired-ca/serial
        {
            echo "[ca]"
            echo "default_ca = test"
            echo "[test]"
            echo "database = $pki/expired-ca/index.txt"
            echo "serial = $pki/expired-ca/serial"
            echo "new_certs_dir = $pki/expired-ca"
            echo "certificate = $pki/ca.pem"
            echo "private_key = $pki/ca.key"
            echo "default_md = sha256"
            echo "policy = any"
            echo "[any]"
            echo "commonName = supplied"
            echo "[ext]"
            echo "subjectAltName = IP:127.0.0.1"
            echo "extendedKeyUsage = serverAuth"
        } >expired-ca/ca.cnf
        openssl ca -batch -config expired-ca/ca.cnf -extensions ext -notext \
            -startdate 20200101000000Z -enddate 20200102000000Z \
            -in expired.csr -out expired.pem 2>/dev/null
        # ZooKeeper's PEM key store: the unencrypted PKCS#8 key and the certificate in one file.
        cat server.key server.pem >server-keystore.pem
        cat expired.key expired.pem >expired-keystore.pem
        rm -f ./*.csr ./*.ext
        chmod 644 ./*.pem
        chmod 600 ./*.key ./*-keystore.pem
        # SASL DIGEST-MD5 users: `archivist` (daemons, admin) and `ops` (reads only).
        for user in archivist ops; do
            openssl rand -hex 16 | tr -d '\n' >"$user.password"
        done
        touch done
    )
}

# The server's JAAS file: the DIGEST-MD5 users it accepts.
write_jaas() { # dir
    (
        umask 077
        {
            echo "Server {"
            echo "    org.apache.zookeeper.server.auth.DigestLoginModule required"
            echo "    user_archivist=\"$(cat "$pki/archivist.password")\""
            echo "    user_ops=\"$(cat "$pki/ops.password")\";"
            echo "};"
        } >"$1/jaas.conf"
    )
}

# zoo.cfg lines for the client port of one server, in the security asked for. With `tls`
# there is no plaintext client port at all; with `sasl` unauthenticated sessions are
# closed by the server (enforce.auth.*; sessionRequireClientSASLAuth is its older name).
client_cfg() { # dir port
    local dir=$1 p=$2
    rm -f "$dir/jaas.conf" "$local_dir/zk/tls-ports/$p"
    echo "$security" >"$dir/security"
    if has tls; then
        make_pki
        mkdir -p "$local_dir/zk/tls-ports"
        touch "$local_dir/zk/tls-ports/$p"
        echo "secureClientPort=$p"
        echo "secureClientPortAddress=127.0.0.1"
        echo "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory"
        echo "ssl.keyStore.location=$pki/$server_cert-keystore.pem"
        echo "ssl.keyStore.type=PEM"
        echo "ssl.trustStore.location=$pki/ca.pem"
        echo "ssl.trustStore.type=PEM"
        echo "ssl.clientAuth=$client_auth"
        # the server does not check client certificates against client host names
        echo "ssl.hostnameVerification=false"
    else
        echo "clientPort=$p"
        echo "clientPortAddress=127.0.0.1"
    fi
    if has sasl; then
        make_pki
        write_jaas "$dir"
        echo "authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
        echo "enforce.auth.enabled=true"
        echo "enforce.auth.schemes=sasl"
        echo "sessionRequireClientSASLAuth=true"
    fi
}

# zoo.cfg lines for the traffic between the servers of an ensemble: with `tls` the
# quorum (proposals, snapshots) and leader election connections are TLS too, mutually
# authenticated with the server certificate (it is also a client certificate) and the
# test CA, and the peer's certificate must name its address. Always the valid server
# certificate: an expired one (ZK_TLS_SERVER_CERT=expired) tests clients, not the quorum.
quorum_cfg() {
    has tls || return 0
    echo "sslQuorum=true"
    echo "ssl.quorum.keyStore.location=$pki/server-keystore.pem"
    echo "ssl.quorum.keyStore.type=PEM"
    echo "ssl.quorum.trustStore.location=$pki/ca.pem"
    echo "ssl.quorum.trustStore.type=PEM"
    echo "ssl.quorum.hostnameVerification=true"
}

stop_node() { # dir signal
    local dir=$1 sig=${2:-TERM}
    [[ -f $dir/pid ]] || return 0
    local pid
    pid=$(cat "$dir/pid")
    if kill -0 "$pid" 2>/dev/null; then
        kill "-$sig" "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/pid"
}

common_cfg() {
    cat <<EOF
tickTime=$tick_ms
initLimit=$init_limit
syncLimit=$sync_limit
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=60000
4lw.commands.whitelist=*
extendedTypesEnabled=true
admin.enableServer=false
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
EOF
}

standalone_dir() { echo "$local_dir/zk/standalone-$port"; }

standalone_start() {
    ensure_installed
    local dir
    dir=$(standalone_dir)
    mkdir -p "$dir/data"
    { common_cfg; echo "dataDir=$dir/data"; client_cfg "$dir" "$port"; } >"$dir/zoo.cfg"
    if serving "$port" && ! [[ -f $dir/pid ]]; then
        log "something else already serves ZooKeeper on 127.0.0.1:$port; using it"
    else
        start_node "$dir" "$dir/zoo.cfg" "$dir/zookeeper.log"
        wait_serving "$port" "ZooKeeper" "$dir/zookeeper.log"
    fi
    echo "127.0.0.1:$port"
}

ensemble_dir() { echo "$local_dir/zk/ensemble-$ensemble_base/node$1"; }

ensemble_cfg() { # n
    local n=$1 dir
    dir=$(ensemble_dir "$n")
    mkdir -p "$dir/data"
    echo "$n" >"$dir/data/myid"
    {
        common_cfg
        echo "dataDir=$dir/data"
        client_cfg "$dir" "$((ensemble_base + n))"
        for i in 1 2 3; do
            echo "server.$i=127.0.0.1:$((ensemble_base + 10 + i)):$((ensemble_base + 20 + i))"
        done
        quorum_cfg
    } >"$dir/zoo.cfg"
}

ensemble_connect() { echo "127.0.0.1:$((ensemble_base + 1)),127.0.0.1:$((ensemble_base + 2)),127.0.0.1:$((ensemble_base + 3))"; }

ensemble_start_node() {
    local n=$1 dir
    dir=$(ensemble_dir "$n")
    ensemble_cfg "$n"
    start_node "$dir" "$dir/zoo.cfg" "$dir/zookeeper.log"
}

ensemble_start() {
    ensure_installed
    for n in 1 2 3; do ensemble_start_node "$n"; done
    for n in 1 2 3; do
        wait_serving "$((ensemble_base + n))" "ensemble node $n" "$(ensemble_dir "$n")/zookeeper.log"
    done
    ensemble_connect
}

ensemble_status() {
    for n in 1 2 3; do
        local mode
        mode=$(flw_any "$((ensemble_base + n))" srvr | sed -n 's/^Mode: //p')
        echo "node$n 127.0.0.1:$((ensemble_base + n)) ${mode:-down}"
    done
}

ensemble_leader() {
    for n in 1 2 3; do
        if flw_any "$((ensemble_base + n))" srvr | grep -q '^Mode: leader'; then echo "$n"; return 0; fi
    done
    return 1
}

# zkCli with the JVM flags a TLS and/or SASL ensemble needs (Netty client socket, PEM
# trust and key stores, a JAAS `Client` section); Debian's zkCli.sh has no netty.
zk_cli() { # [tls] [sasl] [-- ARGS]
    local words=() flags=(-Dzookeeper.root.logger=ERROR,CONSOLE)
    while [[ $# -gt 0 && $1 != -- ]]; do words+=("$1"); shift; done
    [[ ${1:-} == -- ]] && shift
    parse_security "${words[@]}"
    if has tls; then
        make_pki
        local keystore="$pki/client-keystore.pem"
        [[ -f $keystore ]] || (umask 077; cat "$pki/client.key" "$pki/client.pem" >"$keystore")
        flags+=(-Dzookeeper.client.secure=true
            -Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty
            "-Dzookeeper.ssl.keyStore.location=$keystore" -Dzookeeper.ssl.keyStore.type=PEM
            "-Dzookeeper.ssl.trustStore.location=$pki/ca.pem" -Dzookeeper.ssl.trustStore.type=PEM
            -Dzookeeper.ssl.hostnameVerification=false)
    fi
    if has sasl; then
        make_pki
        local user=${ZK_CLI_USER:-archivist}
        local jaas="$pki/jaas-client-$user.conf"
        (
            umask 077
            {
                echo "Client {"
                echo "    org.apache.zookeeper.server.auth.DigestLoginModule required"
                echo "    username=\"$user\""
                echo "    password=\"$(cat "$pki/$user.password")\";"
                echo "};"
            } >"$jaas"
        )
        flags+=("-Djava.security.auth.login.config=$jaas")
    else
        flags+=(-Dzookeeper.sasl.client=false)
    fi
    exec java "${flags[@]}" -cp "$classpath" org.apache.zookeeper.ZooKeeperMain \
        -server "${ZK_SERVER:-127.0.0.1:$port}" "$@"
}

case "${1:-}" in
    start)
        shift
        parse_security "$@"
        standalone_start
        ;;
    pki) make_pki; echo "$pki" ;;
    cli) shift; zk_cli "$@" ;;
    stop) stop_node "$(standalone_dir)" ;;
    status)
        if serving "$port"; then
            echo "serving 127.0.0.1:$port ($(flw_any "$port" srvr | sed -n 's/^Mode: //p'))"
        else
            echo "not serving on 127.0.0.1:$port"
            exit 3
        fi
        ;;
    connect-string)
        if [[ ${2:-} == ensemble ]]; then ensemble_connect; else echo "127.0.0.1:$port"; fi
        ;;
    ensemble)
        case "${2:-}" in
            start)
                shift 2
                parse_security "$@"
                ensemble_start
                ;;
            stop) for n in 1 2 3; do stop_node "$(ensemble_dir "$n")"; done ;;
            status) ensemble_status ;;
            leader) ensemble_leader ;;
            kill) stop_node "$(ensemble_dir "${3:?node number}")" KILL ;;
            restart)
                n=${3:?node number}
                stop_node "$(ensemble_dir "$n")" KILL
                # a restarted node keeps the security it was started with
                if [[ -f $(ensemble_dir "$n")/security ]]; then security=$(cat "$(ensemble_dir "$n")/security"); fi
                ensemble_start_node "$n"
                wait_serving "$((ensemble_base + n))" "ensemble node $n" "$(ensemble_dir "$n")/zookeeper.log"
                ;;
            *) echo "usage: $0 ensemble start|stop|status|leader|kill N|restart N" >&2; exit 2 ;;
        esac
        ;;
    *)
        sed -n '2,41p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
