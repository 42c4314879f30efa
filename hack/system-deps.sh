#!/usr/bin/env bash
# Installs the Debian packages the tests run, when missing: iproute2 (the
# LAN tests build networks of namespaces) and dnsmasq-base (the WAN
# discovery tests resolve against a DNS server this project did not
# write). Needs root and apt-get; says what is missing otherwise.
set -euo pipefail
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v dnsmasq >/dev/null 2>&1 || missing+=(dnsmasq-base)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "missing Debian packages: ${missing[*]}; install them (apt-get install ${missing[*]}) and run again" >&2
  exit 1
fi
echo "installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
