// The fabric page: draws the layout (/api/layout) once per fold/unfold, then applies each
// frame (server-sent events from /api/events) to the drawing. Read-only: it only GETs.
'use strict';

const NS = 'http://www.w3.org/2000/svg';
const SW_STATE = { R: 'running', N: 'not-in-sync', U: 'unknown', X: 'unreachable' };
const SW_WORD = { R: 'running', N: 'not in sync', U: 'unknown', X: 'unreachable' };
const SW_RANK = { X: 3, N: 2, U: 1, R: 0 };
const LS_WORD = { u: 'up', d: 'down', s: 'suppressed', h: 'hold-down', a: 'admin-down', '?': 'unknown' };
const LS_RANK = { d: 5, s: 4, h: 3, '?': 2, a: 1, u: 0 };
const CN_WORD = { o: 'read', n: 'none in COUNTERS_DB', s: 'stale (no live plugin writes them)', x: 'DB unreachable' };
const ROW = 100, TOP = 30, NODE_H = 24;

const st = {
  layout: null, frame: null, open: new Set(), unitOf: [], edges: [], nodes: new Map(),
  lastFrameAt: 0, drill: null, drillSeq: -1,
};

function el(tag, attrs, parent) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}
function h(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function num(x, digits) {
  if (x === null || x === undefined || Number.isNaN(x)) return 'unknown';
  const a = Math.abs(x);
  const d = digits === undefined ? 1 : digits;
  if (a >= 1e9) return (x / 1e9).toFixed(d) + ' G';
  if (a >= 1e6) return (x / 1e6).toFixed(d) + ' M';
  if (a >= 1e3) return (x / 1e3).toFixed(d) + ' k';
  return x.toFixed(a < 10 && a > 0 ? d : 0) + ' ';
}
function bps(x) { return x === null || x === undefined ? 'unknown' : num(x) + 'b/s'; }
function perS(x) { return x === null || x === undefined ? 'unknown' : num(x) + '/s'; }
function clock(ms) { return new Date(ms).toLocaleTimeString([], { hour12: false }); }

// Utilisation 0..1 → blue, teal, yellow, deep orange (red is kept for "down").
function utilColor(u) {
  const stops = [[0, [44, 123, 182]], [0.35, [111, 183, 183]], [0.7, [232, 197, 71]], [1, [230, 85, 13]]];
  const x = Math.max(0, Math.min(1, u));
  for (let i = 1; i < stops.length; i++) {
    if (x <= stops[i][0]) {
      const [a, ca] = stops[i - 1], [b, cb] = stops[i];
      const f = (x - a) / (b - a);
      const c = ca.map((v, k) => Math.round(v + (cb[k] - v) * f));
      return `rgb(${c[0]},${c[1]},${c[2]})`;
    }
  }
  return 'rgb(230,85,13)';
}

// --- layout -----------------------------------------------------------------------------

function unitKeys() {
  const L = st.layout;
  st.unitOf = L.switches.map((s, i) =>
    s.group !== undefined && !st.open.has(s.group) ? 'g' + s.group : 's' + i);
}

// Positions of every visible unit: top-tier units spread over the width; groups with members
// below the top tier are columns (one narrow slot folded, a slot per member open).
function place(width) {
  const L = st.layout, top = L.tiers[0];
  const rowY = (t) => TOP + L.tiers.indexOf(t) * ROW;
  const colGroup = L.groups.map((g) => g.members.some((i) => L.switches[i].tier < top));
  const cols = [], seenCol = new Set(), topUnits = [], seenTop = new Set();
  L.switches.forEach((s, i) => {
    const g = s.group;
    if (g !== undefined && colGroup[g]) {
      if (!seenCol.has('c' + g)) { seenCol.add('c' + g); cols.push({ group: g }); }
    } else if (s.tier < top) {
      cols.push({ sw: i });
    } else {
      const u = st.unitOf[i];
      if (!seenTop.has(u)) { seenTop.add(u); topUnits.push(u); }
    }
  });
  for (const c of cols) {
    if (c.group === undefined) { c.px = 88; continue; }
    if (!st.open.has(c.group)) { c.px = 46; continue; }
    const per = {};
    for (const i of L.groups[c.group].members) per[L.switches[i].tier] = (per[L.switches[i].tier] || 0) + 1;
    c.px = Math.max(...Object.values(per)) * 66;
  }
  const natural = cols.reduce((a, c) => a + c.px, 0);
  const W = Math.max(width, natural, topUnits.length * 70);
  const scale = natural > 0 ? W / natural : 1;
  const pos = new Map();
  let x = 0;
  for (const c of cols) {
    const w = c.px * scale;
    if (c.sw !== undefined) {
      pos.set('s' + c.sw, { x: x + w / 2, y: rowY(L.switches[c.sw].tier), w: Math.min(w - 8, 110) });
    } else if (!st.open.has(c.group)) {
      const tiers = L.groups[c.group].members.map((i) => L.switches[i].tier);
      const y0 = rowY(Math.max(...tiers)), y1 = rowY(Math.min(...tiers)) + NODE_H;
      pos.set('g' + c.group, { x: x + w / 2, y: y0, w: w - 6, h: y1 - y0, box: true });
    } else {
      const byTier = {};
      for (const i of L.groups[c.group].members) (byTier[L.switches[i].tier] ||= []).push(i);
      for (const [t, list] of Object.entries(byTier)) {
        const slot = w / list.length;
        list.forEach((i, k) => pos.set('s' + i, { x: x + (k + 0.5) * slot, y: rowY(+t), w: Math.min(slot - 6, 110) }));
      }
      pos.set('c' + c.group, { x: x + w / 2, y: TOP - 22, w: w - 4, open: true });
    }
    x += w;
  }
  topUnits.forEach((u, k) => {
    const slot = W / topUnits.length;
    pos.set(u, { x: (k + 0.5) * slot, y: rowY(top), w: Math.min(slot - 8, u[0] === 'g' ? 120 : 110), box: u[0] === 'g' ? true : undefined, h: NODE_H });
  });
  let height = TOP + L.tiers.length * ROW;
  if (L.draw_hosts) {
    const under = {};
    L.hosts.forEach((hh, i) => (under[hh.leaf] ||= []).push(i));
    const y = TOP + (L.tiers.length - 1) * ROW + ROW * 0.85;
    for (const [leaf, list] of Object.entries(under)) {
      const p = pos.get('s' + leaf);
      if (!p) continue;
      const step = Math.min((p.w + 10) / list.length, 46);
      list.forEach((hi, k) => pos.set('h' + hi, { x: p.x + (k - (list.length - 1) / 2) * step, y }));
    }
    height += 40;
  }
  return { pos, W, height };
}

function build() {
  unitKeys();
  const L = st.layout, svg = document.getElementById('fabric-svg');
  const width = Math.max(600, document.getElementById('canvas').clientWidth - 16);
  const { pos, W, height } = place(width);
  svg.replaceChildren();
  svg.setAttribute('width', W);
  svg.setAttribute('height', height);
  svg.setAttribute('viewBox', `0 0 ${W} ${height}`);
  const gEdges = el('g', { id: 'edges' }, svg), gNodes = el('g', { id: 'nodes' }, svg);
  // Edges: links between two visible units, bundled per pair of units.
  const bundles = new Map();
  L.links.forEach((k, li) => {
    let ua, ub;
    if (k.host) {
      if (!L.draw_hosts) return;
      ua = st.unitOf[k.a]; ub = 'h' + k.b;
    } else {
      ua = st.unitOf[k.a]; ub = st.unitOf[k.b];
      if (ua === ub) return;
    }
    const key = ua < ub ? ua + '|' + ub : ub + '|' + ua;
    if (!bundles.has(key)) bundles.set(key, { ua, ub, links: [] });
    bundles.get(key).links.push(li);
  });
  st.edges = [];
  for (const b of bundles.values()) {
    const pa = pos.get(b.ua), pb = pos.get(b.ub);
    if (!pa || !pb) continue;
    const [up, dn] = pa.y <= pb.y ? [pa, pb] : [pb, pa];
    const y1 = up.y + (up.box && up.h ? Math.min(up.h, NODE_H) : NODE_H), y2 = dn.y;
    const single = b.links.length === 1;
    const line = el('line', { x1: up.x, y1, x2: dn.x, y2, class: single ? 'link' : 'bundle' }, gEdges);
    if (single) {
      line.dataset.i = b.links[0];
      line.dataset.link = L.links[b.links[0]].name;
    } else {
      line.dataset.n = b.links.length;
    }
    const mark = el('circle', { cx: (up.x + dn.x) / 2, cy: (y1 + y2) / 2, r: 4, class: 'mark', visibility: 'hidden' }, gEdges);
    const edge = { line, mark, links: b.links, ua: b.ua, ub: b.ub };
    line.addEventListener('mousemove', (ev) => tip(ev, edgeText(edge)));
    line.addEventListener('mouseleave', hideTip);
    line.addEventListener('click', () => {
      if (single) openDrill('link', b.links[0]);
      else { for (const u of [b.ua, b.ub]) if (u[0] === 'g') st.open.add(+u.slice(1)); build(); }
    });
    st.edges.push(edge);
  }
  st.nodes = new Map();
  for (const [key, p] of pos) {
    if (key[0] === 's') drawSwitch(gNodes, +key.slice(1), p);
    else if (key[0] === 'g') drawGroup(gNodes, +key.slice(1), p);
    else if (key[0] === 'c') drawOpenGroup(gNodes, +key.slice(1), p);
    else if (key[0] === 'h') drawHost(gNodes, +key.slice(1), p);
  }
  L.tiers.forEach((t, k) => {
    const name = { 1: 'leaf', 2: 'spine', 3: 'superspine' }[t] || 'tier ' + t;
    el('text', { x: 4, y: TOP + k * ROW - 6, class: 'tier-label' }, svg).textContent = name;
  });
  document.getElementById('fold').hidden = st.open.size === 0 || !L.fold;
  if (st.frame) apply();
}

function drawSwitch(parent, i, p) {
  const s = st.layout.switches[i];
  const g = el('g', { class: 'sw', 'data-switch': s.name, 'data-state': 'unknown' }, parent);
  el('rect', { x: p.x - p.w / 2, y: p.y, width: p.w, height: NODE_H, rx: 5 }, g);
  if (p.w >= 44) {
    const label = p.w < 70 ? s.name.replace(/^.*-/, '') : s.name;
    el('text', { x: p.x, y: p.y + 16, 'text-anchor': 'middle' }, g).textContent = label;
  }
  g.addEventListener('mousemove', (ev) => tip(ev, switchText(i)));
  g.addEventListener('mouseleave', hideTip);
  g.addEventListener('click', () => openDrill('switch', i));
  st.nodes.set('s' + i, g);
}

function drawGroup(parent, gi, p) {
  const grp = st.layout.groups[gi];
  const g = el('g', { class: 'grp', 'data-group': grp.name, 'data-state': 'unknown' }, parent);
  const h = p.h || NODE_H;
  el('rect', { x: p.x - p.w / 2, y: p.y, width: p.w, height: h, rx: 6, class: 'box' }, g);
  el('text', { x: p.x, y: p.y + 14, 'text-anchor': 'middle' }, g).textContent = grp.name;
  const sub = el('text', { x: p.x, y: p.y + 27, 'text-anchor': 'middle', class: 'sub' }, g);
  sub.textContent = grp.members.length + '';
  const bar = el('g', {}, g);
  g._bar = { bar, x: p.x - p.w / 2 + 3, y: p.y + h - 7, w: p.w - 6 };
  g._sub = sub;
  g.addEventListener('mousemove', (ev) => tip(ev, groupText(gi)));
  g.addEventListener('mouseleave', hideTip);
  g.addEventListener('click', () => { st.open.add(gi); hideTip(); build(); });
  st.nodes.set('g' + gi, g);
}

function drawOpenGroup(parent, gi, p) {
  if (!st.layout.fold) return;
  const grp = st.layout.groups[gi];
  const g = el('g', { class: 'grp-open' }, parent);
  const t = el('text', { x: p.x, y: p.y + 12, 'text-anchor': 'middle', class: 'tier-label' }, g);
  t.textContent = grp.name + ' ▾ fold';
  t.style.pointerEvents = 'all';
  t.style.cursor = 'pointer';
  t.addEventListener('click', () => { st.open.delete(gi); build(); });
}

function drawHost(parent, hi, p) {
  const hh = st.layout.hosts[hi];
  const g = el('g', { class: 'host', 'data-host': hh.name }, parent);
  el('circle', { cx: p.x, cy: p.y, r: 6 }, g);
  el('text', { x: p.x, y: p.y + 17, 'text-anchor': 'middle' }, g).textContent = hh.name.replace(/^.*-/, '');
}

// --- frames -----------------------------------------------------------------------------

function linkState(li) { return st.frame ? st.frame.ls[li] || '?' : '?'; }
function linkUtil(li) { const u = st.frame ? st.frame.lu[li] : -1; return u === undefined || u < 0 ? null : u / 1000; }

function apply() {
  const f = st.frame;
  for (const e of st.edges) {
    let worst = 'u', util = null, known = 0, ecn = 0, pause = 0, storm = false;
    for (const li of e.links) {
      const s = linkState(li);
      if (LS_RANK[s] > LS_RANK[worst]) worst = s;
      const u = linkUtil(li);
      if (u !== null) { known++; util = util === null ? u : Math.max(util, u); }
      const hot = f.hot[li];
      if (hot) { ecn += hot.ecn || 0; pause += hot.pause || 0; storm ||= !!hot.storm; }
    }
    e.line.dataset.state = LS_WORD[worst];
    e.line.dataset.util = util === null ? 'unknown' : Math.round(util * 100) + '';
    e.line.style.stroke = util === null ? '' : utilColor(util);
    const n = e.links.length;
    e.line.style.strokeWidth = (n === 1 ? 2.2 : 2 + Math.log2(n)) + (ecn || pause ? 1 : 0);
    e.mark.setAttribute('visibility', ecn || pause || storm ? 'visible' : 'hidden');
    e.mark.setAttribute('class', 'mark ' + (storm ? 'storm' : pause ? 'pause' : 'ecn'));
  }
  st.layout.switches.forEach((s, i) => {
    const n = st.nodes.get('s' + i);
    if (n) n.dataset.state = SW_STATE[f.sw[i]] || 'unknown';
  });
  st.layout.groups.forEach((grp, gi) => {
    const n = st.nodes.get('g' + gi);
    if (!n) return;
    const counts = { R: 0, N: 0, U: 0, X: 0 };
    let worst = 'R';
    for (const i of grp.members) {
      const c = f.sw[i] || 'U';
      counts[c]++;
      if (SW_RANK[c] > SW_RANK[worst]) worst = c;
    }
    n.dataset.state = SW_STATE[worst];
    n.dataset.running = counts.R;
    n._sub.textContent = `${counts.R}/${grp.members.length}`;
    const { bar, x, y, w } = n._bar;
    bar.replaceChildren();
    let at = x;
    for (const c of ['R', 'N', 'U', 'X']) {
      const sw = (w * counts[c]) / grp.members.length;
      if (sw > 0) el('rect', { x: at, y, width: sw, height: 4, class: 'seg-' + c }, bar);
      at += sw;
    }
  });
  summary(f);
  findings(f.diagnosis);
  events(f.events);
  if (st.drill && f.seq !== st.drillSeq) refreshDrill();
}

function summary(f) {
  const t = f.totals;
  const set = (id, v) => { document.getElementById(id).textContent = v; };
  set('sum-running', t.running);
  set('sum-not-in-sync', t.not_in_sync);
  set('sum-unknown', t.unknown);
  set('sum-unreachable', t.unreachable);
  set('sum-links-up', t.links_up);
  set('sum-links-down', t.links_down);
  set('sum-links-out', t.links_out);
  set('sum-links-unknown', t.links_unknown);
  const run = f.run;
  const r = document.getElementById('run');
  r.dataset.state = run.state;
  r.textContent = 'weft run: ' + run.state + (run.reconvergences !== undefined ? ` · ${run.reconvergences} reconvergences` : '') +
    (run.last_ms !== undefined ? ` (last ${run.last_ms.toFixed(0)} ms)` : '');
  r.title = run.detail;
  document.getElementById('source').textContent = f.source;
  document.getElementById('took').textContent = f.took_ms + ' ms';
  document.getElementById('interval').textContent = f.interval_s ? f.interval_s.toFixed(1) + ' s' : '– (first read)';
  document.body.dataset.seq = f.seq;
}

function findings(d) {
  const s = document.getElementById('diag-state');
  s.dataset.state = d.state;
  const span = d.span_s.toFixed(1) + ' s';
  const sampled = `${d.switches_sampled} of ${d.switches_total} switches sampled`;
  s.textContent = {
    findings: `${d.findings.length} finding(s) over ${span}, ${sampled}`,
    'nothing found': `nothing found over ${span}, ${sampled}` + (d.switches_sampled < d.switches_total ? ' — the others are not judged' : ''),
    collecting: `collecting samples (${d.samples} of 2 needed)`,
    'no data': 'no data: no switch has counters from a live plugin — nothing can be judged',
  }[d.state] || d.state;
  const ol = document.getElementById('findings');
  ol.replaceChildren();
  for (const x of d.findings) {
    const li = h('li', undefined, 'finding');
    li.dataset.kind = x.kind;
    li.dataset.target = x.target;
    const head = h('div');
    head.append(h('span', x.kind.replace(/_/g, ' '), 'kind'), ' ', h('b', x.target), ' ', h('span', `(confidence ${x.confidence.toFixed(2)})`, 'conf'));
    li.append(head, h('div', x.summary));
    for (const e of x.evidence.slice(0, 6)) {
      li.append(h('div', `evidence: ${e.switch}${e.port ? ':' + e.port : ''} ${e.counter} +${e.delta} (${num(e.per_second)}/s)`, 'ev'));
    }
    if (x.evidence.length > 6) li.append(h('div', `… ${x.evidence.length - 6} more`, 'ev'));
    if (x.victims && x.victims.length) li.append(h('div', 'affected: ' + x.victims.join(', '), 'vic'));
    li.append(h('div', 'action: ' + x.action, 'act'));
    li.addEventListener('click', () => highlight(x));
    ol.append(li);
  }
}

function highlight(x) {
  const names = new Set([x.target.split(':')[0], ...x.evidence.map((e) => e.switch)]);
  const L = st.layout;
  L.switches.forEach((s, i) => {
    if (!names.has(s.name)) return;
    if (s.group !== undefined && !st.open.has(s.group)) { st.open.add(s.group); build(); }
  });
  document.querySelectorAll('.hl').forEach((n) => n.classList.remove('hl'));
  L.switches.forEach((s, i) => { if (names.has(s.name)) st.nodes.get('s' + i)?.classList.add('hl'); });
  setTimeout(() => document.querySelectorAll('.hl').forEach((n) => n.classList.remove('hl')), 6000);
}

function events(list) {
  const ol = document.getElementById('events');
  ol.replaceChildren();
  for (const e of list) {
    const li = h('li', undefined, 'k-' + e.kind);
    li.dataset.kind = e.kind;
    li.dataset.subject = e.subject;
    const when = h('time', clock(e.t_ms));
    const what = h('span', `${e.kind}: ${e.subject} — `);
    const detail = h('span', e.detail, / down$| suppressed$/.test(e.detail) ? 'd' : '');
    li.append(when, what, detail);
    ol.append(li);
  }
}

// --- hover text -------------------------------------------------------------------------

function dropsText(i) {
  const d = st.frame && st.frame.drops[i];
  if (!d) return '';
  return `\ndrops at ${st.layout.switches[i].name}: ` + Object.entries(d).map(([r, v]) => `${r} ${perS(v)}`).join(', ');
}

function edgeText(e) {
  const L = st.layout, f = st.frame;
  if (e.links.length === 1) {
    const li = e.links[0], k = L.links[li], s = linkState(li), u = linkUtil(li);
    const hot = (f && f.hot[li]) || {};
    let t = `${k.name}\n${LS_WORD[s]}` + (f && f.run.state !== 'running' && !k.host ? ' (weft run not running: use unknown)' : '');
    t += '\nutilisation: ' + (u === null ? 'unknown (no counters from a live plugin at either end)' : `${(u * 100).toFixed(1)}% of ${k.gbps} Gb/s (busier direction)`);
    if (u !== null) t += `\nECN marks: ${perS(hot.ecn || 0)}   PAUSE frames: ${perS(hot.pause || 0)}` + (hot.storm ? '\nPFC watchdog: STORMED' : '');
    t += dropsText(k.a) + (k.host ? '' : dropsText(k.b));
    return t;
  }
  const counts = {};
  let max = null;
  for (const li of e.links) {
    const s = LS_WORD[linkState(li)];
    counts[s] = (counts[s] || 0) + 1;
    const u = linkUtil(li);
    if (u !== null) max = max === null ? u : Math.max(max, u);
  }
  const name = (u) => (u[0] === 'g' ? L.groups[+u.slice(1)].name : L.switches[+u.slice(1)].name);
  return `${e.links.length} links ${name(e.ua)} ↔ ${name(e.ub)}\n` + Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(', ') +
    `\nbusiest: ${max === null ? 'unknown' : (max * 100).toFixed(1) + '%'}\nclick to open`;
}

function switchText(i) {
  const s = st.layout.switches[i], f = st.frame;
  if (!f) return s.name;
  const c = f.sw[i];
  return `${s.name} (${s.role})\n${SW_WORD[c] || 'unknown'}` + (f.why[i] ? `: ${f.why[i]}` : '') +
    `\ncounters: ${CN_WORD[f.cn[i]] || 'unknown'}` + dropsText(i);
}

function groupText(gi) {
  const g = st.layout.groups[gi], f = st.frame;
  if (!f) return g.name;
  const counts = {};
  for (const i of g.members) { const w = SW_WORD[f.sw[i]] || 'unknown'; counts[w] = (counts[w] || 0) + 1; }
  let down = 0, inner = 0;
  st.layout.links.forEach((k, li) => {
    if (!k.host && st.layout.switches[k.a].group === gi && st.layout.switches[k.b].group === gi) {
      inner++;
      if (linkState(li) === 'd') down++;
    }
  });
  return `${g.name}: ${g.members.length} switches\n` + Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(', ') +
    `\n${inner} links inside, ${down} down\nclick to open`;
}

const tipEl = () => document.getElementById('tip');
function tip(ev, text) {
  const t = tipEl();
  t.textContent = text;
  t.hidden = false;
  t.style.left = Math.min(ev.clientX + 14, window.innerWidth - 430) + 'px';
  t.style.top = ev.clientY + 14 + 'px';
}
function hideTip() { tipEl().hidden = true; }

// --- drill-down -------------------------------------------------------------------------

function openDrill(kind, i) {
  st.drill = { kind, i };
  document.querySelectorAll('.sel').forEach((n) => n.classList.remove('sel'));
  if (kind === 'switch') st.nodes.get('s' + i)?.classList.add('sel');
  refreshDrill();
}

async function refreshDrill() {
  if (!st.drill) return;
  st.drillSeq = st.frame ? st.frame.seq : -1;
  const { kind, i } = st.drill;
  const r = await fetch(`/api/${kind}/${i}`);
  if (!r.ok || !st.drill || st.drill.i !== i) return;
  const d = await r.json();
  const box = document.getElementById('drill');
  box.hidden = false;
  box.dataset.kind = kind;
  document.getElementById('drill-title').textContent = (kind === 'link' ? 'link ' : 'switch ') + d.name;
  const body = document.getElementById('drill-body'), charts = document.getElementById('drill-charts');
  body.replaceChildren();
  charts.replaceChildren();
  const table = h('table');
  const row = (k, v) => { const tr = h('tr'); tr.append(h('th', k), h('td', v)); table.append(tr); };
  if (kind === 'link') {
    row('state', LS_WORD[d.state] || 'unknown');
    row('ends', d.ends.map((e) => `${e.switch}:${e.port} ${e.up === null ? 'no state' : e.up ? 'up' : 'down'}`).join('   '));
    row('speed', d.gbps + ' Gb/s');
    row(`${d.from} → ${d.to}`, bps(d.now.ab_bps));
    row(`${d.to} → ${d.from}`, bps(d.now.ba_bps));
    row('ECN marks', perS(d.now.ecn));
    row('PAUSE frames', perS(d.now.pause) + (d.now.storm ? ' — watchdog STORMED' : ''));
    row('trimmed', d.trimmed === null || d.trimmed === undefined ? 'no counter read' : perS(d.trimmed));
    body.append(table);
    const gb = d.gbps * 1e9;
    const pct = (v) => v.map((x) => (x === null ? null : (100 * x) / gb));
    charts.append(chart('utilisation %', d.series.t, [[`${d.from} → ${d.to}`, pct(d.series.ab_bps)], [`${d.to} → ${d.from}`, pct(d.series.ba_bps)]], 0));
    charts.append(chart('per second', d.series.t, [['ECN marks', d.series.ecn], ['PAUSE frames', d.series.pause]], 2));
  } else {
    row('state', (SW_WORD[d.state] || 'unknown') + (d.why ? ': ' + d.why : ''));
    row('plugin', d.plugin ? `${d.plugin.state}` + (d.plugin.pid ? `, pid ${d.plugin.pid}, up ${d.plugin.uptime_s} s, ${d.plugin.pending_keys} keys pending` : '') : d.plugin_read);
    row('port states', d.ports_read);
    row('counters', CN_WORD[d.counters] || 'unknown');
    if (d.now) {
      row('rx / tx', `${bps(d.now.rx_bps)} / ${bps(d.now.tx_bps)}`);
      row('ECN marks', perS(d.now.ecn));
      row('PAUSE rx / tx', `${perS(d.now.pause_rx)} / ${perS(d.now.pause_tx)}`);
      row('drops', Object.keys(d.now.drops).length ? Object.entries(d.now.drops).map(([r, v]) => `${r} ${perS(v)}`).join(', ') : 'none counted');
    }
    row('DB', d.db);
    body.append(table);
    const ports = h('table');
    for (const p of d.links) {
      const tr = h('tr');
      tr.append(h('td', p.port), h('td', p.name), h('td', LS_WORD[p.state] || 'unknown'), h('td', p.utilisation === null || p.utilisation < 0 ? 'util unknown' : (p.utilisation / 10).toFixed(1) + '%'));
      tr.style.cursor = 'pointer';
      tr.addEventListener('click', () => openDrill('link', p.link));
      ports.append(tr);
    }
    body.append(ports);
    const g = (v) => v.map((x) => (x === null ? null : x / 1e9));
    charts.append(chart('Gb/s', d.series.t, [['rx', g(d.series.rx_bps)], ['tx', g(d.series.tx_bps)]], 0));
    charts.append(chart('per second', d.series.t, [['ECN marks', d.series.ecn], ['PAUSE received', d.series.pause], ['drops', d.series.drops]], 2));
  }
}

function chart(title, t, series, colour0) {
  const W = 660, H = 130, L = 46, B = 18;
  const svg = el('svg', { width: W, height: H, class: 'chart' });
  const vals = series.flatMap(([, v]) => v).filter((x) => x !== null);
  const max = Math.max(1e-9, ...vals) * 1.1;
  const t0 = t.length ? t[0] : 0, t1 = t.length ? t[t.length - 1] : 1;
  const X = (x) => L + ((x - t0) / Math.max(1, t1 - t0)) * (W - L - 8);
  const Y = (y) => H - B - (y / max) * (H - B - 16);
  el('line', { x1: L, y1: H - B, x2: W - 8, y2: H - B, class: 'axis' }, svg);
  el('line', { x1: L, y1: 12, x2: L, y2: H - B, class: 'axis' }, svg);
  el('text', { x: 2, y: 14 }, svg).textContent = num(max / 1.1).trim();
  el('text', { x: 2, y: H - B }, svg).textContent = '0';
  el('text', { x: L, y: H - 4 }, svg).textContent = t.length ? clock(t0) : 'no points yet';
  if (t.length) el('text', { x: W - 60, y: H - 4 }, svg).textContent = clock(t1);
  series.forEach(([name, v], k) => {
    let pts = [];
    const flush = () => { if (pts.length) el('polyline', { points: pts.join(' '), class: 'c' + (colour0 + k) }, svg); pts = []; };
    v.forEach((y, j) => { if (y === null) flush(); else pts.push(`${X(t[j]).toFixed(1)},${Y(y).toFixed(1)}`); });
    flush();
    el('text', { x: L + 8 + k * 150, y: 11, class: 'lg c' + (colour0 + k) }, svg).textContent = '— ' + name;
  });
  el('text', { x: W - 160, y: 11 }, svg).textContent = title + (vals.length ? '' : ' (unknown)');
  return svg;
}

// --- connection -------------------------------------------------------------------------

function setConn(state, text) {
  const c = document.getElementById('conn');
  c.dataset.conn = state;
  c.textContent = text;
}

function connect() {
  const es = new EventSource('/api/events');
  es.addEventListener('frame', (ev) => {
    const f = JSON.parse(ev.data);
    if (!f) return;
    st.frame = f;
    st.lastFrameAt = Date.now();
    document.body.classList.remove('stale');
    setConn('live', 'live · read ' + clock(f.t_ms));
    apply();
  });
  es.onerror = () => setConn('lost', 'connection lost, retrying…');
  setInterval(() => {
    if (!st.frame) return;
    const age = (Date.now() - st.lastFrameAt) / 1000;
    const limit = Math.max(5, 3 * (st.frame.interval_s || 1));
    if (age > limit) {
      document.body.classList.add('stale');
      setConn('stale', `no update for ${age.toFixed(0)} s: what is shown is old`);
    }
  }, 1000);
}

async function main() {
  const r = await fetch('/api/layout');
  st.layout = await r.json();
  document.getElementById('fabric').textContent = st.layout.fabric;
  document.title = 'Weft · ' + st.layout.fabric;
  if (!st.layout.fold || new URLSearchParams(location.search).has('unfold')) {
    st.layout.groups.forEach((_, gi) => st.open.add(gi));
  }
  document.getElementById('fold').addEventListener('click', () => { st.open.clear(); build(); });
  document.getElementById('drill-close').addEventListener('click', () => {
    st.drill = null;
    document.getElementById('drill').hidden = true;
    document.querySelectorAll('.sel').forEach((n) => n.classList.remove('sel'));
  });
  let resize;
  window.addEventListener('resize', () => { clearTimeout(resize); resize = setTimeout(build, 200); });
  build();
  connect();
}

main();
