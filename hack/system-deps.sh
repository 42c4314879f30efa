#!/usr/bin/env bash
# Installs the Debian packages the tests run, when missing: iproute2 (the
# LAN tests build networks of namespaces), dnsmasq-base and bind9 (the WAN
# discovery tests resolve against DNS servers this project did not write),
# containerd, runc, containernetworking-plugins and nftables (the
# harness's real nodes run containers; kube-proxy programs nftables),
# wireguard-tools and iperf3 (the network benchmark configures the
# reference wireguard-go by hand and measures throughput), busybox-static,
# bind9-dnsutils, curl and netcat-openbsd (make conformance builds the
# suite's images from them: busybox's shell and applets; dig, curl and nc,
# which the suite calls), chromium (the broker's dashboard is tested in
# a real headless browser), and avahi-daemon, avahi-utils, nodejs and npm
# (LAN discovery is tested against avahi and the npm package multicast-dns;
# with --no-install-recommends, libnss-mdns and the machine's nsswitch.conf
# are left alone).
# Needs root and apt-get; says what is missing otherwise. No service is
# started: the tests run named and dnsmasq themselves, on loopback ports,
# each real node its own containerd, and avahi-daemon with a D-Bus of its
# own in a network namespace of the test's.
set -euo pipefail
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v dnsmasq >/dev/null 2>&1 || [ -x /usr/sbin/dnsmasq ] || missing+=(dnsmasq-base)
command -v named >/dev/null 2>&1 || [ -x /usr/sbin/named ] || missing+=(bind9)
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || missing+=(nftables)
command -v wg >/dev/null 2>&1 || missing+=(wireguard-tools)
command -v iperf3 >/dev/null 2>&1 || missing+=(iperf3)
command -v busybox >/dev/null 2>&1 || missing+=(busybox-static)
command -v dig >/dev/null 2>&1 || missing+=(bind9-dnsutils)
command -v curl >/dev/null 2>&1 || missing+=(curl)
[ -x /bin/nc.openbsd ] || missing+=(netcat-openbsd)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ -x /usr/sbin/avahi-daemon ] || missing+=(avahi-daemon)
command -v avahi-browse >/dev/null 2>&1 || missing+=(avahi-utils)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "missing Debian packages: ${missing[*]}; install them (apt-get install ${missing[*]}) and run again" >&2
  exit 1
fi
echo "installing ${missing[*]}"
# A package's own service (named on port 53) must not start: the Debian
# way to say so is a policy-rc.d that refuses, kept only for the install.
policy=/usr/sbin/policy-rc.d
added_policy=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  added_policy=1
fi
cleanup() { if [ -n "$added_policy" ]; then rm -f "$policy"; fi; }
trap cleanup EXIT
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
