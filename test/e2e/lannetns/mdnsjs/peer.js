// An mDNS peer written with the npm package multicast-dns, not with this
// project's code, run by the LAN interop test inside a network namespace
// of the test's own.
//
//   node peer.js browse <interface address> <service type>
//     Asks the link for its service types (RFC 6763 §9, as avahi-browse -a
//     does), then for the instances of <service type>, 20 times, half a
//     second apart; then prints one JSON line per instance found,
//     {"types": [...], "instance": ..., "txt": [...]}, and exits.
//
//   node peer.js announce <interface address> <service type> <instance> <port> <txt>...
//     Announces the instance (PTR, SRV, TXT, A), answers queries for it,
//     announces it again every second, at most 300 times, and sends a
//     goodbye (TTL 0) when it gets SIGTERM.
'use strict';

const mdnsFactory = require('multicast-dns');

const [mode, address, type, ...rest] = process.argv.slice(2);
const mdns = mdnsFactory({ interface: address, bind: '0.0.0.0', port: 5353, ip: '224.0.0.251', reuseAddr: true });
const enumeration = '_services._dns-sd._udp.local';
const service = `${type}.local`;

if (mode === 'browse') {
  const types = new Set();
  const txts = new Map();
  mdns.on('response', (resp) => {
    for (const rr of [...resp.answers, ...resp.additionals]) {
      if (rr.type === 'PTR' && rr.name.toLowerCase() === enumeration) {
        types.add(rr.data);
      }
      if (rr.type === 'TXT' && rr.name.toLowerCase().endsWith(`.${service.toLowerCase()}`)) {
        txts.set(rr.name, rr.data.map((b) => b.toString()));
      }
    }
  });
  let asked = 0;
  const ask = () => {
    if (asked++ >= 20) {
      // What was found, with the types as they were known at the end.
      for (const [instance, txt] of txts) {
        console.log(JSON.stringify({ types: [...types], instance, txt }));
      }
      mdns.destroy();
      return;
    }
    mdns.query({ questions: [{ name: enumeration, type: 'PTR' }] });
    if (types.has(service)) {
      mdns.query({ questions: [{ name: service, type: 'PTR' }] });
    }
    setTimeout(ask, 500);
  };
  ask();
} else if (mode === 'announce') {
  const [instanceName, port, ...txt] = rest;
  const instance = `${instanceName}.${service}`;
  const host = `${instanceName}.local`;
  const records = (ttl) => [
    { name: service, type: 'PTR', ttl, data: instance },
    { name: instance, type: 'SRV', ttl, data: { port: Number(port), target: host } },
    { name: instance, type: 'TXT', ttl, data: txt },
    { name: host, type: 'A', ttl, data: address },
  ];
  mdns.on('query', (q) => {
    if (q.questions.some((qq) => [service, enumeration].includes(qq.name.toLowerCase()))) {
      mdns.respond({ answers: records(120) });
    }
  });
  let sent = 0;
  const announce = () => {
    if (sent++ < 300) {
      mdns.respond({ answers: records(120) });
      timer = setTimeout(announce, 1000);
    }
  };
  let timer = null;
  announce();
  process.on('SIGTERM', () => {
    clearTimeout(timer);
    mdns.respond({ answers: records(0) }, () => mdns.destroy());
  });
  console.log(JSON.stringify({ announced: instance }));
} else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
