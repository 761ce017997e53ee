// Lockstep's built-in page: renders /api/view (operator/src/web_view.cc) into
// the sections of index.html. Every value from the cluster goes into the DOM
// as text (textContent, setAttribute), never as markup. Refreshes every
// ?refresh=SECONDS (default 10; 0: once).
'use strict';

const SVG = 'http://www.w3.org/2000/svg';

// el('td', {class: 'x', 'data-node': n}, child...): children are nodes or text.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

function table(headers, rows, attrs) {
  return el('table', attrs, el('thead', {}, el('tr', {}, ...headers.map((h) => el('th', {}, h)))),
            el('tbody', {}, ...rows));
}

function badge(kind, value) {
  if (value === undefined || value === null || value === '') return el('span', {class: 'muted'}, '-');
  return el('span', {class: `badge ${kind}-${value}`}, value);
}

function fmtNs(ns) {
  if (ns === undefined || ns === null) return '-';
  if (Math.abs(ns) >= 1e6) return `${(ns / 1e6).toFixed(2)} ms`;
  if (Math.abs(ns) >= 1e3) return `${(ns / 1e3).toFixed(2)} µs`;
  return `${ns} ns`;
}

function fmtTime(t) { return t ? t.replace('T', ' ').replace('Z', ' UTC') : '-'; }

function empty(text) { return el('p', {class: 'empty'}, text); }

function renderSummary(v) {
  const s = v.summary;
  const phases = s.phases || {};
  const card = (label, value, id) => el('div', {class: 'card', id}, el('div', {class: 'muted'}, label),
                                          el('div', {class: 'value'}, value));
  return el('div', {class: 'cards'},
            card('Nodes', s.nodes, 'summary-nodes'),
            card('Healthy', phases.Healthy || 0, 'summary-healthy'),
            card('Degraded', phases.Degraded || 0, 'summary-degraded'),
            card('Failed', phases.Failed || 0, 'summary-failed'),
            card('Rails up', `${s.railsUp} / ${s.railsTotal}`, 'summary-rails'),
            card('Training jobs', s.jobs, 'summary-jobs'),
            card('Fleet audits', s.audits, 'summary-audits'));
}

function renderFleet(v) {
  if (!v.nodes.length) return empty('No FabricHealth yet: no node is selected by a FabricPolicy.');
  const rails = v.rails;
  const rows = v.nodes.map((n) => {
    const byName = Object.fromEntries(n.rails.map((r) => [r.name, r]));
    const railCells = rails.map((name) => {
      const r = byName[name];
      if (!r) return el('td', {class: 'rail', 'data-rail': name}, '');
      return el('td', {class: `rail ${r.state}`, 'data-rail': name, 'data-state': r.state,
                       title: `${r.reason}: ${r.message} (since ${fmtTime(r.since)})`}, r.state);
    });
    const clock = n.clock || {};
    return el('tr', {'data-node': n.name, 'data-phase': n.phase || ''},
              el('th', {}, n.name), el('td', {}, badge('phase', n.phase)), ...railCells,
              el('td', {class: 'num'}, n.railsTotal === undefined ? '-' : `${n.railsUp}/${n.railsTotal}`),
              el('td', {class: 'num'}, n.flapsLastHour === undefined ? '-' : n.flapsLastHour),
              el('td', {}, clock.state || '-'),
              el('td', {class: 'audit-result'}, badge('verdict', n.auditResult)),
              el('td', {}, n.gpu ? n.gpu.state : '-'),
              el('td', {}, n.ready ? `${n.ready.reason || ''}` : '-'),
              el('td', {class: n.latency && n.latency.status === 'False' ? 'state-down' : '',
                        title: n.latency ? n.latency.message || '' : ''},
                 n.latency ? `${n.latency.status === 'True' ? 'within' : n.latency.reason || ''}` : '-'),
              el('td', {}, fmtTime(n.lastReportTime)));
  });
  const note = rails.length ? null : el('p', {class: 'muted'}, 'No rail reported yet (fabric rails are configured in the FabricPolicy).');
  return el('div', {class: 'scroll'}, note,
            table(['Node', 'Phase', ...rails, 'Rails up', 'Flaps/h', 'Clock', 'Audit', 'GPU', 'Ready', 'Latency SLA', 'Last report'],
                  rows, {id: 'fleet-table'}));
}

function renderFlaps(v) {
  if (!v.flaps.length) return empty('No rail transition known.');
  const now = Date.parse(v.generatedAt);
  // The span: the last hour, narrowed to the transitions in it (5 minutes at least).
  const inHour = v.flaps.map((f) => Date.parse(f.time)).filter((t) => t >= now - 3600e3);
  const oldest = inHour.length ? Math.min(...inHour) : now - 3600e3;
  const span = Math.min(3600e3, Math.max(300e3, (now - oldest) * 1.2));
  const from = now - span;
  // Lanes: node/rail with their transitions, oldest first.
  const lanes = new Map();
  for (const f of v.flaps.slice().reverse()) {
    const key = `${f.node} ${f.rail}`;
    if (!lanes.has(key)) lanes.set(key, []);
    lanes.get(key).push(f);
  }
  const keys = [...lanes.keys()].sort();
  const laneH = 16, left = 170, width = 900, top = 4;
  const h = top + lanes.size * laneH + 20;
  const s = svg('svg', {class: 'timeline', viewBox: `0 0 ${left + width + 10} ${h}`, role: 'img'});
  const x = (t) => left + Math.max(0, Math.min(1, (t - from) / (now - from))) * width;
  const colour = {up: '#2e7d32', degraded: '#f9a825', down: '#c62828', unknown: '#9e9e9e'};
  let i = 0;
  for (const key of keys) {
    const list = lanes.get(key);
    const y = top + i * laneH;
    const label = svg('text', {x: 0, y: y + 11});
    label.textContent = key;
    s.append(label);
    list.forEach((f, j) => {
      const t0 = Date.parse(f.time);
      const t1 = j + 1 < list.length ? Date.parse(list[j + 1].time) : now;
      if (t1 < from) return;
      const r = svg('rect', {x: x(t0), y: y + 2, width: Math.max(1, x(t1) - x(t0)), height: laneH - 4,
                             fill: colour[f.state] || colour.unknown, 'data-state': f.state});
      const title = svg('title', {});
      title.textContent = `${f.node} ${f.rail}: ${f.state} (${f.reason}) at ${fmtTime(f.time)}`;
      r.append(title);
      s.append(r);
      if (t0 >= from) s.append(svg('rect', {x: x(t0) - 1, y: y, width: 2, height: laneH, fill: '#000'}));
    });
    i++;
  }
  for (let k = 4; k >= 0; k--) {
    const ago = (span * k) / 4;
    const t = svg('text', {x: x(now - ago) - 10, y: h - 4});
    t.textContent = k ? `-${Math.round(ago / 60e3)}m` : 'now';
    s.append(t);
  }
  const rows = v.flaps.slice(0, 50).map((f) => el('tr', {'data-flap-node': f.node, 'data-flap-rail': f.rail, 'data-state': f.state},
      el('td', {}, fmtTime(f.time)), el('td', {}, f.node), el('td', {}, f.rail),
      el('td', {class: `rail ${f.state}`}, f.state), el('td', {}, f.reason), el('td', {}, f.message)));
  return el('div', {}, s, table(['Time', 'Node', 'Rail', 'State', 'Reason', 'Message'], rows, {id: 'flap-table'}));
}

function renderClock(v) {
  const withClock = v.clock.filter((c) => c.errorBoundNs !== undefined);
  if (!withClock.length) return empty('No node reports a clock estimate yet.');
  const scale = Math.max(...withClock.map((c) => Math.max(c.errorBoundNs, c.maxErrorBoundNs))) * 1.1;
  const rows = v.clock.map((c) => {
    const track = el('div', {class: 'bar-track'});
    if (c.errorBoundNs !== undefined) {
      const over = c.errorBoundNs > c.maxErrorBoundNs;
      const cls = over ? 'state-down' : c.state === 'LOCKED' ? 'state-up' : 'state-degraded';
      const bar = el('div', {class: `bar ${cls}`});
      bar.style.width = `${(100 * c.errorBoundNs) / scale}%`;
      const limit = el('div', {class: 'bar-limit', title: `limit ${fmtNs(c.maxErrorBoundNs)}`});
      limit.style.left = `${(100 * c.maxErrorBoundNs) / scale}%`;
      track.append(bar, limit);
    }
    return el('tr', {'data-clock-node': c.node, 'data-bound-ns': c.errorBoundNs},
              el('th', {}, c.node), el('td', {}, c.state || '-'), el('td', {class: 'num'}, fmtNs(c.errorBoundNs)),
              el('td', {}, track), el('td', {class: 'num'}, fmtNs(c.maxErrorBoundNs)),
              el('td', {class: 'num'}, fmtNs(c.offsetNs)), el('td', {class: 'num'}, c.peers === undefined ? '-' : c.peers));
  });
  return table(['Node', 'State', 'Error bound', '', 'Limit', 'Offset', 'Peers'], rows, {id: 'clock-table'});
}

function checksTable(checks) {
  const rows = checks.map((c) => el('tr', {'data-check': c.id, 'data-verdict': c.verdict},
      el('td', {}, c.id), el('td', {}, c.subject || ''), el('td', {}, c.observed || ''),
      el('td', {}, c.expected || ''), el('td', {}, badge('verdict', c.verdict)), el('td', {}, c.message || '')));
  return table(['Check', 'Subject', 'Observed', 'Expected', 'Verdict', 'Message'], rows, {class: 'checks'});
}

// Replaces an area's failed-only table with every check of that area.
async function loadArea(details, name, area) {
  if (details.dataset.loaded) return;
  details.dataset.loaded = 'loading';
  try {
    const r = await fetch(`api/nodeaudit?name=${encodeURIComponent(name)}`, {cache: 'no-store'});
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    const full = (await r.json()).areas.find((a) => a.area === area);
    details.querySelector('table.checks').replaceWith(checksTable(full ? full.checks : []));
    const note = details.querySelector('.omitted');
    if (note) note.remove();
    details.dataset.loaded = 'yes';
  } catch (e) {
    details.dataset.loaded = '';
    const note = details.querySelector('.omitted');
    if (note) note.textContent = `could not load the other checks: ${e.message}`;
  }
}

function renderAudits(v) {
  if (!v.audits.length) return empty('No FleetAudit: create one to audit the fleet (kubectl apply -f a FleetAudit).');
  return el('div', {}, ...v.audits.map((a, ai) => {
    const failing = a.failingChecks.length
      ? table(['Failing check', 'Nodes', 'First nodes'], a.failingChecks.map((c) =>
          el('tr', {}, el('td', {}, c.check), el('td', {class: 'num'}, c.nodes), el('td', {}, c.nodeNames.join(', ')))))
      : null;
    const nodes = a.nodeAudits.map((n) => {
      const areas = n.areas.map((ar) => {
        const d = el('details', {class: 'audit-area', 'data-area': ar.area},
                     el('summary', {}, `${ar.area}: ${ar.passed} passed, ${ar.failed} failed, ${ar.notPresent} not present`),
                     checksTable(ar.checks));
        if (ar.omitted) {
          // The view carries failed checks only; the rest on drill-down.
          d.append(el('p', {class: 'muted omitted'}, `${ar.omitted} more checks (loading when opened)`));
          d.addEventListener('toggle', () => { if (d.open) loadArea(d, n.name, ar.area); });
        }
        if (ar.failed) d.open = true;
        return d;
      });
      const d = el('details', {class: 'node-audit', 'data-node-audit': n.node, 'data-verdict': n.verdict || ''},
                   el('summary', {}, `${n.node} `, badge('verdict', n.verdict),
                      ` ${n.passed || 0} passed, ${n.failed || 0} failed, ${n.notPresent || 0} not present`),
                   n.error ? el('p', {}, `Error: ${n.error}`) : null, ...areas);
      if (n.verdict === 'Fail') d.open = true;
      return d;
    });
    const d = el('details', {class: 'audit', 'data-audit': a.name, 'data-phase': a.phase || ''},
                 el('summary', {}, `${a.name} `, badge('phase', a.phase),
                    ` nodes ${a.nodes || 0}, passed ${a.passed || 0}, failed ${a.failed || 0}, pending ${a.pending || 0}`,
                    el('span', {class: 'muted'}, ` started ${fmtTime(a.startTime)}`)),
                 failing, ...nodes);
    if (ai === 0) d.open = true;
    return d;
  }));
}

function renderJobs(v) {
  if (!v.jobs.length) return empty('No TrainingJob.');
  const phaseOf = Object.fromEntries(v.nodes.map((n) => [n.name, n.phase]));
  const podRow = (p, label, attrs) => el('tr', attrs, el('td', {}, label), el('td', {}, p.pod), el('td', {}, p.node || '-'),
      el('td', {}, badge('phase', p.phase)), el('td', {}, p.node ? badge('phase', phaseOf[p.node]) : '-'));
  return el('div', {}, ...v.jobs.map((j) => {
    const rows = [
      ...j.ranks.map((r) => podRow(r, `rank ${r.rank}`, {'data-rank': r.rank, 'data-pod': r.pod, 'data-node': r.node})),
      ...j.sparePods.map((p) => podRow(p, 'spare', {'data-spare': p.pod, 'data-node': p.node})),
      ...(j.coordinator ? [podRow(j.coordinator, 'coordinator', {'data-coordinator': j.coordinator.pod})] : []),
      ...j.retiredPods.map((p) => podRow(p, 'retired', {'data-retired': p.pod})),
    ];
    const migrations = j.migrationHistory.length
      ? table(['Rank', 'From', 'To', 'Reason', 'Started', 'Completed', 'Duration'], j.migrationHistory.map((m) =>
          el('tr', {'data-migration-rank': m.rank}, el('td', {class: 'num'}, m.rank), el('td', {}, m.fromPod || ''),
             el('td', {}, m.toPod || ''), el('td', {}, m.reason || ''), el('td', {}, fmtTime(m.startTime)),
             el('td', {}, fmtTime(m.completeTime)), el('td', {class: 'num'}, m.durationMs === undefined ? '-' : `${m.durationMs} ms`))),
          {class: 'migrations'})
      : el('p', {class: 'muted'}, 'No migration yet.');
    const conds = j.conditions.filter((c) => c.status !== 'True' || c.type !== 'Ready')
      .map((c) => el('li', {}, `${c.type}=${c.status} ${c.reason || ''}: ${c.message || ''}`));
    return el('div', {class: 'job', 'data-job': `${j.namespace}/${j.name}`, 'data-phase': j.phase || ''},
              el('h3', {}, `${j.namespace}/${j.name} `, badge('phase', j.phase),
                 j.source ? el('span', {class: 'muted'}, ` protects ${j.source.kind} ${j.source.name}`) : null),
              el('div', {}, `ranks ready ${j.readyReplicas ?? 0}/${j.replicas}, spares available ${j.availableSpares ?? 0}/${j.spares}, migrations ${j.migrations ?? 0}`),
              conds.length ? el('ul', {}, ...conds) : null,
              table(['Role', 'Pod', 'Node', 'Pod phase', 'Node phase'], rows, {class: 'pods'}),
              migrations);
  }));
}

function render(v) {
  const put = (id, node) => document.getElementById(id).replaceChildren(node);
  put('summary', renderSummary(v));
  put('fleet-grid', renderFleet(v));
  put('flap-timeline', renderFlaps(v));
  put('clock-bounds', renderClock(v));
  put('audit-tree', renderAudits(v));
  put('job-list', renderJobs(v));
}

// Keeps the <details> a reader opened or closed across refreshes.
function detailsState() {
  const m = new Map();
  for (const d of document.querySelectorAll('details')) m.set(detailsKey(d), d.open);
  return m;
}
function detailsKey(d) {
  const parts = [];
  for (let e = d; e; e = e.parentElement && e.parentElement.closest('details')) {
    parts.push(e.dataset.audit || e.dataset.nodeAudit || e.dataset.area || '');
  }
  return parts.join('/');
}

async function refresh() {
  const status = document.getElementById('status');
  try {
    const r = await fetch('api/view', {cache: 'no-store'});
    if (!r.ok) throw new Error(`api/view: HTTP ${r.status}`);
    const v = await r.json();
    const open = detailsState();
    render(v);
    for (const d of document.querySelectorAll('details')) {
      const k = detailsKey(d);
      if (open.has(k)) d.open = open.get(k);
    }
    status.textContent = `as of ${fmtTime(v.generatedAt)}`;
    // A link to a section (#audits) scrolls there once its content is in.
    if (document.body.dataset.state !== 'ready' && location.hash) {
      const target = document.getElementById(location.hash.slice(1));
      if (target) target.scrollIntoView();
    }
    document.body.dataset.state = 'ready';
  } catch (e) {
    status.textContent = `could not load: ${e.message}`;
    document.body.dataset.state = 'error';
  }
}

const every = Number(new URLSearchParams(location.search).get('refresh') ?? 10);
refresh();
if (every > 0) setInterval(refresh, every * 1000);
