#!/usr/bin/env bash
# TLS: W3 (redis-benchmark -t set,get -r 1000000 -c 50 at -P 1 and -P 16) over TLS and in
# plaintext, against Debian's Redis 7.0 and Abacus in the same run (rounds alternated so the
# machine's drift hits both alike), then the handshake rate: new TLS connections per second
# (`openssl s_time -new`: connect, full handshake, close; no session reuse).
# Certificates (ECDSA P-256) are made with openssl in a temporary directory; both servers
# run with `tls-auth-clients no`, as a client without its own certificate would meet them.
#
#   bench/tls.sh                      defaults: N=1000000 requests, ROUNDS=3, 5 s of handshakes
#   N=200000 ROUNDS=1 HS_SECONDS=3 bench/tls.sh     quicker
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-1000000}
ROUNDS=${ROUNDS:-3}
HS_SECONDS=${HS_SECONDS:-5}

C=$BENCH_TMP/certs; mkdir -p "$C"
(
  cd "$C"
  EC=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1)
  openssl req -x509 -new -nodes "${EC[@]}" -keyout ca.key -out ca.crt -days 2 -subj /CN=bench-ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  openssl req -new -nodes "${EC[@]}" -keyout server.key -out server.csr -subj /CN=localhost 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' > ext
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile ext 2>/dev/null
)
TLS_ARGS=(--tls-cert-file "$C/server.crt" --tls-key-file "$C/server.key" --tls-ca-cert-file "$C/ca.crt" --tls-auth-clients no)
RPORT=$(free_port); RTLS=$(free_port); start_redis "$RPORT" --tls-port "$RTLS" "${TLS_ARGS[@]}"
APORT=$(free_port); ATLS=$(free_port); start_abacus "$APORT" --appendonly no --save "" --tls-port "$ATLS" "${TLS_ARGS[@]}" ${ABACUS_ARGS:-}
CLIENT_TLS=(--tls --cacert "$C/ca.crt")

declare -A results
for P in 1 16; do
  for round in $(seq 1 "$ROUNDS"); do
    for target in redis abacus; do
      for link in plain tls; do
        case $target,$link in
          redis,plain) port=$RPORT; extra=() ;;
          redis,tls) port=$RTLS; extra=("${CLIENT_TLS[@]}") ;;
          abacus,plain) port=$APORT; extra=() ;;
          abacus,tls) port=$ATLS; extra=("${CLIENT_TLS[@]}") ;;
        esac
        for t in set get; do
          rps=$(redis-benchmark -p "$port" "${extra[@]}" -t "$t" -r 1000000 -n "$N" -c 50 -P "$P" -q --csv | awk -F, 'NR==2 {gsub(/"/,"",$2); print $2}')
          results[$target,$link,$P,$t]+="$rps "
          printf '%-6s %-5s -P %-2s %s round %d: %10.0f requests/s\n' "$target" "$link" "$P" "$t" "$round" "$rps"
        done
      done
    done
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo
printf '%-12s %12s %12s %12s %12s %10s %10s %12s\n' test redis redis_tls abacus abacus_tls r_tls/plain a_tls/plain a_tls/r_tls
for P in 1 16; do
  for t in SET GET; do
    lt=${t,,}
    r=$(echo "${results[redis,plain,$P,$lt]}" | median); rt=$(echo "${results[redis,tls,$P,$lt]}" | median)
    a=$(echo "${results[abacus,plain,$P,$lt]}" | median); at=$(echo "${results[abacus,tls,$P,$lt]}" | median)
    printf '%-12s %12.0f %12.0f %12.0f %12.0f %10.2f %10.2f %12.2f\n' "$t -P $P" "$r" "$rt" "$a" "$at" \
      "$(echo "$rt / $r" | bc -l)" "$(echo "$at / $a" | bc -l)" "$(echo "$at / $rt" | bc -l)"
  done
done

# Handshakes: openssl s_time prints "N connections in T real seconds".
echo
for target in redis abacus; do
  port=$RTLS; [ "$target" = abacus ] && port=$ATLS
  out=$(openssl s_time -connect "127.0.0.1:$port" -new -time "$HS_SECONDS" -CAfile "$C/ca.crt" 2>/dev/null | grep 'real seconds' | head -1)
  n=$(echo "$out" | awk '{print $1}'); s=$(echo "$out" | awk '{print $4}')
  printf '%-6s handshakes: %s connections in %s s = %.0f/s\n' "$target" "$n" "$s" "$(echo "$n / $s" | bc -l)"
done
