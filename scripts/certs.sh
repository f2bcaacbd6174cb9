#!/usr/bin/env bash
# Makes a throwaway certificate authority and certificates for trying TLS,
# for the tests' documentation and for minibench. ECDSA P-256 everywhere.
#
#   scripts/certs.sh DIR [SERVER_NAME...]
#
# DIR gets:
#   ca.pem ca.key          the CA (give ca.pem to clients and to servers that check client certs)
#   server.pem server.key  server certificate; SAN: localhost, 127.0.0.1, ::1 and SERVER_NAMEs
#   client.pem client.key  client certificate for mutual TLS; CN=alice, SAN email alice@example.com
# Keys are unencrypted and readable only by the owner. Valid for 30 days
# (CERT_DAYS to change). Not for production.
set -euo pipefail
dir=${1:?usage: certs.sh DIR [SERVER_NAME...]}
shift
days=${CERT_DAYS:-30}
mkdir -p "$dir"
cd "$dir"
umask 077

san="DNS:localhost,IP:127.0.0.1,IP:::1"
for name in "$@"; do
  if [[ $name =~ ^[0-9.]+$ || $name == *:* ]]; then san+=",IP:$name"; else san+=",DNS:$name"; fi
done

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -sha256 -days "$days" -subj "/CN=authrpc test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out ca.pem

leaf() {  # name subject extensions
  key "$1.key"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -sha256 -days "$days" \
    -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

leaf server "/CN=localhost" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=$san"
leaf client "/CN=alice" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth
subjectAltName=email:alice@example.com"
rm -f ca.srl
chmod 644 ca.pem server.pem client.pem
echo "certificates in $(pwd): ca.pem server.pem/.key client.pem/.key"
