#!/bin/sh
# Creates the namespace Kedge runs in, once; `kedge setup` then adds
# Kedge's search attributes to it.
set -eu
: "${TEMPORAL_ADDRESS:=temporal:7233}" "${TEMPORAL_NAMESPACE:=default}"
# Temporal wants mutual TLS; the temporal CLI reads these itself.
: "${TEMPORAL_TLS_CLIENT_CERT_PATH:?}" "${TEMPORAL_TLS_CLIENT_KEY_PATH:?}" "${TEMPORAL_TLS_SERVER_CA_CERT_PATH:?}" "${TEMPORAL_TLS_SERVER_NAME:?}"
export TEMPORAL_TLS_CLIENT_CERT_PATH TEMPORAL_TLS_CLIENT_KEY_PATH TEMPORAL_TLS_SERVER_CA_CERT_PATH TEMPORAL_TLS_SERVER_NAME
tries=0
until temporal operator cluster health --address "$TEMPORAL_ADDRESS"; do
	tries=$((tries + 1))
	[ "$tries" -ge 30 ] && { echo "temporal at $TEMPORAL_ADDRESS is not healthy"; exit 1; }
	sleep 2
done
temporal operator namespace describe --address "$TEMPORAL_ADDRESS" -n "$TEMPORAL_NAMESPACE" >/dev/null 2>&1 ||
	temporal operator namespace create --address "$TEMPORAL_ADDRESS" -n "$TEMPORAL_NAMESPACE" --retention 30d
echo "namespace $TEMPORAL_NAMESPACE is ready"
