#!/usr/bin/env bash
# Deploy.TwoReplicasBehindNginx: two `lfmvox serve` replicas of one demo checkpoint behind nginx
# configured by deploy/nginx.conf (only its upstream servers and listen address replaced).
#   1. 20 speech requests (greedy, seed 0: deterministic) sent at once through nginx each return the PCM
#      a request straight to replica 1 returns, byte for byte;
#   2. least_conn spread them: each replica's /metrics counts at least 5 of the 20 (least_conn over two
#      replicas with 20 overlapping requests, generation slots of 10 each), and together exactly 20;
#   3. a streamed request (stream_format audio) arrives through nginx in several chunks, the bytes
#      again equal to the direct reply;
#   4. the WebSocket upgrade passes: 20 realtime conversations at once through nginx, with the official
#      `openai` client (tests/deploy/realtime_spread.mjs), each answer equal to the direct one, spread by
#      least_conn (each replica's /metrics counts at least 5 of the 20 upgrades, together exactly 20);
#   5. the page's own Origin (host and port as the browser sent them) passes nginx and the replica's
#      same-origin check (101), a foreign one does not (403).
# usage: replicas_test.sh SOURCE_DIR LFMVOX MAKE_CHECKPOINT NODE_WORK
# Exits 77 (ctest: skipped) when nginx or curl is missing, or (after the HTTP parts) node with the pinned
# clients (tests/clients/npm_install.sh into NODE_WORK).
set -euo pipefail
src=$1 lfmvox=$2 make_checkpoint=$3 node_work=$4
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
command -v curl >/dev/null || skip "curl is not installed"
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || skip "nginx is not installed (scripts/install-deps.sh installs it)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lfmvox_deploy.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

"$make_checkpoint" lfm25-audio --size demo --tokenizer "$src/tests/data/tokenizer/tokenizer.json" \
  --out "$tmp/model" --steer-tts "Hello there." --voice "US female" >/dev/null 2>&1 ||
  fail "lfmvox-make-checkpoint failed"

# Two replicas on free ports (--port 0; each prints the address it bound).
ports=()
for i in 1 2; do
  "$lfmvox" serve --model "$tmp/model" --port 0 --threads 1 --max-sessions 10 --max-new 40 \
    2>"$tmp/replica$i.log" &
  pids+=($!)
done
for i in 1 2; do
  for _ in $(seq 1 300); do
    grep -q "ready" "$tmp/replica$i.log" && break
    sleep 0.1
  done
  port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/replica$i.log")
  [ -n "$port" ] && grep -q ready "$tmp/replica$i.log" || fail "replica $i did not start: $(cat "$tmp/replica$i.log")"
  ports+=("$port")
done

# nginx on a free port, from deploy/nginx.conf with the replicas' addresses.
# nginx cannot bind port 0: a random port nothing answers on.
for _ in $(seq 1 50); do
  listen=$((20000 + RANDOM % 40000))
  (exec 3<>"/dev/tcp/127.0.0.1/$listen") 2>/dev/null || break
done
mkdir -p "$tmp/nginx/logs"
{
  echo "daemon off; worker_processes 1; pid $tmp/nginx/nginx.pid; error_log $tmp/nginx/logs/error.log;"
  echo "events { worker_connections 256; }"
  echo "http { access_log $tmp/nginx/logs/access.log;"
  echo "  client_body_temp_path $tmp/nginx/body; proxy_temp_path $tmp/nginx/proxy;"
  echo "  fastcgi_temp_path $tmp/nginx/fcgi; uwsgi_temp_path $tmp/nginx/uwsgi; scgi_temp_path $tmp/nginx/scgi;"
  awk -v a="${ports[0]}" -v b="${ports[1]}" -v l="$listen" '
    /# LFMVOX_REPLICA/ { n++; sub(/127\.0\.0\.1:[0-9]+/, "127.0.0.1:" (n == 1 ? a : b)) }
    /# LFMVOX_LISTEN/ { sub(/127\.0\.0\.1:[0-9]+/, "127.0.0.1:" l) }
    { print }' "$src/deploy/nginx.conf"
  echo "}"
} >"$tmp/nginx/nginx.conf"
"$nginx" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" 2>"$tmp/nginx/stderr" &
pids+=($!)
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$listen/nginx-health" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$listen/nginx-health" >/dev/null || fail "nginx did not start: $(cat "$tmp/nginx/stderr" "$tmp/nginx/logs/error.log" 2>/dev/null)"

body='{"model":"demo","input":"Hello there.","voice":"US female","response_format":"pcm","temperature":0,"seed":0}'
speech() { # URL OUT [extra curl args]
  local url=$1 out=$2
  shift 2
  curl -sS -f -o "$out" -H 'Content-Type: application/json' -d "$body" "$@" "$url/v1/audio/speech"
}
speech "http://127.0.0.1:${ports[0]}" "$tmp/direct.pcm" || fail "direct request failed"
[ -s "$tmp/direct.pcm" ] || fail "the direct reply is empty"
before=()
count() { # PORT: speech requests answered 200 so far
  curl -sf "http://127.0.0.1:$1/metrics" |
    sed -n 's/^lfmvox_http_requests_total{endpoint="\/v1\/audio\/speech",status="200"} \([0-9]*\)$/\1/p' | head -n 1
}
for p in "${ports[@]}"; do before+=("$(count "$p")"); done

clients=()
for i in $(seq 1 20); do
  speech "http://127.0.0.1:$listen" "$tmp/via$i.pcm" &
  clients+=($!)
done
for i in "${!clients[@]}"; do
  wait "${clients[$i]}" || fail "request $((i + 1)) through nginx failed"
done
for i in $(seq 1 20); do
  cmp -s "$tmp/direct.pcm" "$tmp/via$i.pcm" || fail "reply $i through nginx differs from the direct reply"
done
served=()
for k in 0 1; do served+=($(($(count "${ports[$k]}") - ${before[$k]:-0}))); done
echo "replica 1 served ${served[0]}, replica 2 served ${served[1]} of 20"
[ $((served[0] + served[1])) -eq 20 ] || fail "the replicas count $((served[0] + served[1])) requests, not 20"
[ "${served[0]}" -ge 5 ] && [ "${served[1]}" -ge 5 ] || fail "least_conn did not spread the requests"

# Streaming passes unbuffered: the reply is chunked and equals the direct bytes.
stream_body=${body%\}}',"stream_format":"audio"}'
curl -sS -f -D "$tmp/stream.headers" -o "$tmp/stream.pcm" -H 'Content-Type: application/json' \
  -d "$stream_body" "http://127.0.0.1:$listen/v1/audio/speech" || fail "streamed request failed"
grep -qi '^transfer-encoding: chunked' "$tmp/stream.headers" || fail "the streamed reply is not chunked"
cmp -s "$tmp/direct.pcm" "$tmp/stream.pcm" || fail "the streamed reply differs from the direct one"

# 20 realtime conversations through nginx (WebSocket upgrade), spread over the replicas.
rc=0
"$src/tests/clients/npm_install.sh" "$node_work" || rc=$?
[ "$rc" -eq 0 ] || skip "HTTP parts passed; the realtime part needs node with the pinned clients (tests/clients/npm_install.sh exit $rc)"
upgrades() { # PORT: realtime upgrades answered 101 so far
  curl -sf "http://127.0.0.1:$1/metrics" |
    sed -n 's/^lfmvox_http_requests_total{endpoint="\/v1\/realtime",status="101"} \([0-9]*\)$/\1/p' | head -n 1
}
before=()
for p in "${ports[@]}"; do before+=("$(upgrades "$p")"); done
node "$src/tests/deploy/realtime_spread.mjs" "$node_work" "$src/tests/data/inputs/synthetic_24k.wav" "${ports[0]}" \
  "$listen" 20 || fail "realtime conversations through nginx failed"
served=()
for k in 0 1; do served+=($(($(upgrades "${ports[$k]}") - ${before[$k]:-0}))); done
# Replica 1 also took the direct reference conversation.
served[0]=$((served[0] - 1))
echo "realtime: replica 1 took ${served[0]}, replica 2 took ${served[1]} of 20"
[ $((served[0] + served[1])) -eq 20 ] || fail "the replicas count $((served[0] + served[1])) upgrades, not 20"
[ "${served[0]}" -ge 5 ] && [ "${served[1]}" -ge 5 ] || fail "least_conn did not spread the conversations"
# The web page's upgrade: a browser on the page behind nginx sends Origin http://HOST:PORT; nginx passes
# the Host as sent (port included), so the replica's same-origin check lets it through, and a foreign
# Origin is still refused.
upgrade() { # ORIGIN: the status of GET /v1/realtime with Upgrade through nginx
  curl -s -o /dev/null -w '%{http_code}' --http1.1 -H 'Connection: Upgrade' -H 'Upgrade: websocket' \
    -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' -H "Origin: $1" \
    --max-time 3 "http://127.0.0.1:$listen/v1/realtime" || true
}
code=$(upgrade "http://127.0.0.1:$listen")
[ "$code" = 101 ] || fail "the page's own Origin through nginx was answered $code, not 101"
code=$(upgrade "http://evil.example")
[ "$code" = 403 ] || fail "a foreign Origin through nginx was answered $code, not 403"
echo "PASS"
