// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.
//
// The broker's dashboard (docs/broker.md). Everything a peer wrote (names,
// labels, messages) is put in the page as text, never as markup.
'use strict';

const TOKEN_KEY = 'liqo-broker-token';
const SVG = 'http://www.w3.org/2000/svg';

let token = sessionStorage.getItem(TOKEN_KEY) || '';
let state = null; // the last State from GET /api/v1/events
let stream = null; // the AbortController of the stream read now
let policyDirty = false; // the policy text holds an edit not saved yet

const $ = (id) => document.getElementById(id);

// el makes an element with attributes and children (strings as text).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === '') continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function say(text, isError) {
  const m = $('message');
  m.textContent = text || '';
  m.className = isError ? 'error' : 'note';
}

function setLive(text) {
  $('live').textContent = text;
}

// api calls the broker's API with the token; a refusal throws the
// message of the Status it answered.
async function api(method, path, body) {
  const headers = { Authorization: 'Bearer ' + token };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body, cache: 'no-store' });
  const text = await res.text();
  let obj = null;
  try { obj = JSON.parse(text); } catch (e) { obj = null; }
  if (!res.ok) {
    throw new Error(obj && obj.message ? obj.message : res.status + ' ' + res.statusText);
  }
  return obj;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// listen reads the event stream, and opens it again when it ends (a
// stream lasts minutes) or breaks, waiting longer after each failure.
async function listen() {
  if (stream) stream.abort();
  const ac = new AbortController();
  stream = ac;
  let wait = 1000;
  while (!ac.signal.aborted) {
    try {
      const res = await fetch('/api/v1/events', {
        headers: { Authorization: 'Bearer ' + token }, signal: ac.signal, cache: 'no-store',
      });
      if (res.status === 401 || res.status === 403 || res.status === 400 || res.status === 404) {
        const s = await res.json().catch(() => null);
        signOut((s && s.message) || ('the broker refused the token: ' + res.status));
        return;
      }
      if (!res.ok) throw new Error('the broker answered ' + res.status);
      wait = 1000;
      setLive('Live');
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const chunk = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (onEvent(chunk)) return;
        }
      }
    } catch (e) {
      if (ac.signal.aborted) return;
      setLive('Disconnected (' + e.message + '); trying again');
    }
    await sleep(wait);
    wait = Math.min(wait * 2, 30000);
  }
}

// onEvent handles one server-sent event; true when the stream must end.
function onEvent(chunk) {
  let event = 'message';
  let data = '';
  for (const line of chunk.split('\n')) {
    if (line.startsWith('event: ')) event = line.slice(7);
    else if (line.startsWith('data: ')) data += line.slice(6);
  }
  if (event === 'state') {
    state = JSON.parse(data);
    render();
    setLive('Live, updated ' + new Date().toLocaleTimeString());
  } else if (event === 'error') {
    const s = JSON.parse(data);
    signOut(s.message);
    return true;
  } else if (event === 'unavailable') {
    setLive(JSON.parse(data).message);
  }
  return false;
}

function signIn(t) {
  token = t;
  sessionStorage.setItem(TOKEN_KEY, t);
  $('signin').hidden = true;
  $('signout').hidden = false;
  say('');
  setLive('Connecting');
  listen();
}

function signOut(why) {
  if (stream) stream.abort();
  stream = null;
  token = '';
  state = null;
  sessionStorage.removeItem(TOKEN_KEY);
  for (const id of ['providers', 'selection', 'policy']) $(id).hidden = true;
  $('signin').hidden = false;
  $('signout').hidden = true;
  $('who').textContent = '';
  setLive('');
  say(why || '', !!why);
}

// inUse are the providers the consumer's pods go to: the decision's
// under a policy decided on, else those enabled by hand.
function inUse(sel) {
  if (sel.policy && sel.status && sel.status.decision) return sel.status.decision.chosen || [];
  return sel.providers || [];
}

function fmtMillis(ms) {
  if (ms === undefined || ms === null) return '–';
  return ms < 10 ? ms.toFixed(1) + ' ms' : Math.round(ms) + ' ms';
}

function fmtPercent(x) {
  return x === undefined || x === null ? '–' : (x * 100).toFixed(x >= 0.9995 || x === 0 ? 0 : 1) + '%';
}

function fmtAge(t) {
  if (!t) return 'never measured';
  const s = Math.max(0, Math.round((Date.now() - Date.parse(t)) / 1000));
  return 'measured ' + (s < 90 ? s + ' s' : Math.round(s / 60) + ' min') + ' ago';
}

function resources(list) {
  if (!list) return '–';
  const keys = ['cpu', 'memory', 'pods', 'nvidia.com/gpu'].filter((k) => list[k] !== undefined);
  for (const k of Object.keys(list).sort()) if (!keys.includes(k)) keys.push(k);
  return keys.length ? keys.map((k) => k + ' ' + list[k]).join(', ') : '–';
}

// sparkline draws values (0..max) as a line; label says it in words.
function sparkline(values, max, label) {
  const svg = document.createElementNS(SVG, 'svg');
  const w = 120;
  const h = 24;
  svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
  svg.setAttribute('width', w);
  svg.setAttribute('height', h);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  svg.classList.add('spark');
  const title = document.createElementNS(SVG, 'title');
  title.textContent = label;
  svg.append(title);
  // One minute of history yet: a level line.
  if (values.length === 1) values = [values[0], values[0]];
  if (values.length > 1 && max > 0) {
    const pts = values.map((v, i) => {
      const x = (i / (values.length - 1)) * (w - 2) + 1;
      const y = h - 1 - (Math.min(v, max) / max) * (h - 2);
      return x.toFixed(1) + ',' + y.toFixed(1);
    });
    const line = document.createElementNS(SVG, 'polyline');
    line.setAttribute('points', pts.join(' '));
    svg.append(line);
  }
  return svg;
}

function healthCell(k) {
  if (!k || !k.measured) return el('td', {}, el('span', { class: 'badge unknown' }, 'Not measured'));
  if (k.reachable) return el('td', {}, el('span', { class: 'badge up' }, 'Up'), el('div', { class: 'sub' }, fmtAge(k.measured)));
  const since = k.unreachableSince ? ' since ' + new Date(k.unreachableSince).toLocaleTimeString() : '';
  return el('td', {}, el('span', { class: 'badge down', title: k.lastError || '' }, 'Down' + since),
    k.lastError ? el('div', { class: 'sub' }, k.lastError) : null, el('div', { class: 'sub' }, fmtAge(k.measured)));
}

function latencyCell(c, k) {
  if (!k) return el('td', {}, '–');
  const hist = (k.history || []).map((p) => p.latencyMillis);
  const max = Math.max(1, ...hist);
  const label = 'Latency of ' + c.clusterName + ' over the last hour: ' + (hist.length
    ? 'from ' + fmtMillis(Math.min(...hist)) + ' to ' + fmtMillis(Math.max(...hist))
    : 'no history yet');
  return el('td', {}, el('span', { class: 'value' }, fmtMillis(k.latencyMillis)),
    k.tunnelLatencyMillis != null ? el('div', { class: 'sub' }, 'tunnel ' + fmtMillis(k.tunnelLatencyMillis)) : null,
    sparkline(hist, max, label));
}

function availabilityCell(c, k) {
  if (!k) return el('td', {}, '–');
  const up = k.uptime || {};
  const hist = (k.history || []).map((p) => p.up);
  const label = 'Availability of ' + c.clusterName + ' over the last hour, a point a minute';
  return el('td', {},
    el('span', { class: 'value' }, '1h ' + fmtPercent(up['1h']) + ' · 24h ' + fmtPercent(up['24h']) + ' · 7d ' + fmtPercent(up['7d'])),
    sparkline(hist, 1, label));
}

function offerCell(c) {
  if (!c.offer) return el('td', {}, 'No offer');
  const labels = Object.entries(c.offer.labels || {}).map(([k, v]) => el('li', {}, k + '=' + v));
  return el('td', {}, resources(c.offer.resources), labels.length ? el('ul', { class: 'labels' }, labels) : null);
}

// number reads a Kubernetes quantity ("30m", "1.5", "2Ki") as a number.
function number(q) {
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$/.exec(String(q));
  if (!m) return NaN;
  const scale = { '': 1, n: 1e-9, u: 1e-6, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
    Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, Pi: 1024 ** 5, Ei: 1024 ** 6 }[m[2]];
  return scale === undefined ? NaN : parseFloat(m[1]) * scale;
}

function priceCell(c) {
  if (!c.offer || !c.offer.prices) return el('td', {}, '–');
  const prices = {};
  for (const [k, v] of Object.entries(c.offer.prices)) {
    const n = number(v);
    prices[k] = Number.isNaN(n) ? v : String(+n.toPrecision(6));
  }
  const unit = (c.offer.currency ? ' ' + c.offer.currency : '') + ' per unit per ' + (c.offer.period || 'Hour').toLowerCase();
  return el('td', {}, resources(prices), el('div', { class: 'sub' }, unit));
}

function podsCell(k) {
  const p = (k && k.pods) || {};
  return el('td', {}, (p.running || 0) + ' running, ' + (p.pending || 0) + ' pending, ' + (p.failed || 0) + ' failed',
    p.startMillis !== undefined ? el('div', { class: 'sub' }, 'median start ' + fmtMillis(p.startMillis)) : null);
}

// decisionCell explains what the consumer's decision made of provider c.
function decisionCell(sel, c) {
  if (!sel) return null;
  if (!sel.policy) {
    return el('td', {}, (sel.providers || []).includes(c.clusterID) ? 'Enabled by hand' : 'Not enabled', el('div', { class: 'sub' }, 'no policy'));
  }
  const d = sel.status && sel.status.decision;
  const pd = d && (d.providers || []).find((p) => p.clusterID === c.clusterID);
  if (!pd) return el('td', {}, 'Not decided yet');
  const details = [];
  if (pd.criterion) {
    details.push(el('li', {}, 'criterion ' + pd.criterion + ': measured ' + (pd.measured || '–') + ', limit ' + (pd.limit || '–')));
  }
  for (const t of pd.terms || []) {
    details.push(el('li', {}, t.name + ': ' + (t.measured ? t.measured + ', ' : '') + 'score ' + t.score + ' × weight ' + t.weight));
  }
  const summary = pd.verdict + (pd.terms && pd.terms.length ? ', score ' + pd.score : '');
  return el('td', { class: 'why' },
    el('details', {}, el('summary', {}, el('span', { class: 'verdict v-' + pd.verdict.toLowerCase() }, summary)),
      pd.message ? el('p', {}, pd.message) : null, details.length ? el('ul', {}, details) : null));
}

// toggleCell is the provider's In use button: under a policy it pins the
// provider in or out, without one it enables or disables it.
function toggleCell(sel, c) {
  if (!sel) return null;
  const used = inUse(sel).includes(c.clusterID);
  let pin = '';
  if (sel.policy && (sel.providers || []).includes(c.clusterID)) pin = 'pinned in';
  if (sel.policy && (sel.excluded || []).includes(c.clusterID)) pin = 'pinned out';
  const b = el('button', {
    type: 'button', class: 'toggle', 'aria-pressed': used ? 'true' : 'false',
    'aria-label': 'Use ' + c.clusterName + ' (' + c.clusterID + ')', 'data-id': c.clusterID,
  }, used ? 'In use' : 'Not in use');
  b.addEventListener('click', () => toggle(c, !used, b));
  return el('td', {}, b, pin ? el('div', { class: 'sub' }, pin) : null);
}

async function toggle(c, enable, button) {
  button.disabled = true;
  try {
    const sel = await api('POST', '/api/toggle?id=' + encodeURIComponent(c.clusterID) + '&enable=' + enable);
    if (state) state.selection = sel;
    render();
    say((enable ? 'Enabled ' : 'Disabled ') + c.clusterName + (sel.policy ? (enable ? ' (pinned in)' : ' (pinned out)') : '') + '.', false);
    const again = document.querySelector('button.toggle[data-id="' + CSS.escape(c.clusterID) + '"]');
    if (again) again.focus();
  } catch (e) {
    say('Could not ' + (enable ? 'enable ' : 'disable ') + c.clusterName + ': ' + e.message, true);
    button.disabled = false;
  }
}

function renderProviders() {
  const sel = state.selection;
  const body = $('providers-table').tBodies[0];
  const rows = [];
  for (const c of state.clusters) {
    if (!c.provider) continue;
    const k = c.kpis;
    rows.push(el('tr', { 'data-id': c.clusterID },
      el('th', { scope: 'row' }, c.clusterName || c.clusterID, el('div', { class: 'sub' }, c.clusterID), c.ready ? null : el('div', { class: 'sub' }, 'virtual node not ready')),
      healthCell(k), latencyCell(c, k), availabilityCell(c, k), offerCell(c),
      el('td', {}, resources(c.free)), el('td', {}, resources(c.reserved)), priceCell(c), podsCell(k),
      decisionCell(sel, c), toggleCell(sel, c)));
  }
  if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 11 }, 'The broker serves no provider yet.')));
  // A new state must not close what the reader opened, nor take the
  // keyboard's focus away.
  const open = new Set([...body.querySelectorAll('tr[data-id] details[open]')].map((d) => d.closest('tr').dataset.id));
  const active = document.activeElement;
  const focused = active && body.contains(active) && active.matches('button.toggle') ? active.dataset.id : null;
  body.replaceChildren(...rows);
  for (const d of body.querySelectorAll('tr[data-id] details')) {
    if (open.has(d.closest('tr').dataset.id)) d.open = true;
  }
  if (focused) {
    const b = body.querySelector('button.toggle[data-id="' + CSS.escape(focused) + '"]');
    if (b) b.focus();
  }
  document.body.classList.toggle('catalog-only', !sel);
}

function renderSelection() {
  const sel = state.selection;
  $('selection').hidden = !sel;
  $('policy').hidden = !sel;
  if (!sel) return;
  const d = sel.status && sel.status.decision;
  let mode;
  if (!sel.policy) mode = 'No policy: your pods go to the providers you enable.';
  else if (!d) mode = 'The broker chooses under your policy; it has not decided yet.';
  else mode = 'The broker chooses under your policy. Decision of ' + new Date(d.time).toLocaleString() + ': ' + (d.message || (d.chosen || []).join(', '));
  $('selection-mode').textContent = mode;
  const ready = (sel.status.conditions || []).find((c) => c.type === 'Ready');
  $('selection-ready').textContent = ready ? 'Ready: ' + ready.status + (ready.reason ? ' (' + ready.reason + ')' : '') + (ready.message ? ', ' + ready.message : '') : '';
  const names = Object.fromEntries(state.clusters.map((c) => [c.clusterID, c.clusterName]));
  const rows = (sel.status.providers || []).map((p) => el('tr', {},
    el('th', { scope: 'row' }, names[p.clusterID] || p.clusterID, el('div', { class: 'sub' }, p.clusterID)),
    el('td', {}, p.state), el('td', {}, p.pods), el('td', {}, p.held || 0)));
  if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 4 }, 'No provider in use.')));
  $('placement').tBodies[0].replaceChildren(...rows);
  const text = $('policy-text');
  if (!policyDirty && document.activeElement !== text) {
    text.value = sel.policy ? JSON.stringify(sel.policy, null, 2) : '';
  }
}

function render() {
  if (!state) return;
  $('who').textContent = state.consumer ? 'Signed in as consumer ' + state.consumer : 'Signed in: the catalog';
  $('providers').hidden = false;
  renderProviders();
  renderSelection();
}

async function savePolicy(ev) {
  ev.preventDefault();
  const text = $('policy-text').value.trim();
  try {
    JSON.parse(text || '{}');
  } catch (e) {
    say('The policy is not JSON: ' + e.message, true);
    return;
  }
  try {
    const sel = await api('PUT', '/api/v1/selection/policy', text || '{}');
    policyDirty = false;
    if (state) state.selection = sel;
    render();
    say('Policy saved; the broker decides again.', false);
  } catch (e) {
    say('The broker refused the policy: ' + e.message, true);
  }
}

async function clearPolicy() {
  try {
    const sel = await api('DELETE', '/api/v1/selection/policy');
    policyDirty = false;
    $('policy-text').value = '';
    if (state) state.selection = sel;
    render();
    say('Policy cleared: your pods go to the providers you enable.', false);
  } catch (e) {
    say('Could not clear the policy: ' + e.message, true);
  }
}

document.addEventListener('DOMContentLoaded', () => {
  $('signin-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('token').value.trim();
    $('token').value = '';
    if (t) signIn(t);
  });
  $('signout').addEventListener('click', () => signOut(''));
  $('policy-form').addEventListener('submit', savePolicy);
  $('policy-clear').addEventListener('click', clearPolicy);
  $('policy-text').addEventListener('input', () => { policyDirty = true; });
  if (token) signIn(token);
  else $('token').focus();
});
