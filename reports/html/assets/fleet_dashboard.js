// dsperf fleet dashboard (dsreport dashboard --fleet): draws DS.data.fleet, made by
// reports/html/fleet_dashboard_html.cpp from reports/history/fleet_data.h:
//   hosts [names], skus [names], hostSku [sku index per host, -1 none], columns [[firstMs, lastMs, runs]],
//   patterns [{key, title, unit, higherIsBetter, cells (base64: hosts x columns bytes, row-major, the cell
//   relative to its SKU's median in whole percent, 255 none), medians [per SKU: [per column, null none]],
//   fleetMedian [per column], drift [[host, points, first, last, pct, vsFleetPct], worst first], fleetDrift}],
//   checks [per host: null or [states oldest first (h u b r j, checkStateLetter), failed, last failure time, rule, summary, words]],
//   k, n, quarantined [host indices], excludeFile (text).
// The heatmap is one canvas drawn from an ImageData (one pixel per cell, scaled), so 1,000 hosts x 365
// columns is one draw, not 365,000 elements. Text from the data is drawn on canvases or set with
// textContent, never parsed as HTML. Records on <body>: data-fleet-rows, data-fleet-columns,
// data-fleet-cells-drawn, data-fleet-pattern, data-drift-rows, data-host-shown (host index),
// data-host-points, data-fleet-ready-ms (performance.now() when the first draw is done).
(function () {
  var d = DS.data && DS.data.fleet;
  if (!d) return;
  var body = document.body;
  var hosts = d.hosts || [], cols = d.columns || [], pats = d.patterns || [];
  var nh = hosts.length, nc = cols.length;
  var quarantined = {};
  (d.quarantined || []).forEach(function (h) { quarantined[h] = true; });
  var patSel = document.getElementById('fl-pattern');
  var sortSel = document.getElementById('fl-sort');
  var hostIn = document.getElementById('fl-host');
  var canvas = document.getElementById('fl-heatmap');
  var tip = document.getElementById('fl-tip');
  var current = 0, order = [], rowOf = [], layout = null, decoded = {}, hostChart = null, shownHost = -1;

  function cellsOf(pi) {
    if (decoded[pi]) return decoded[pi];
    var text = atob(pats[pi].cells || ''), a = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) a[i] = text.charCodeAt(i);
    if (a.length !== nh * nc) DS.errors.push('fleet pattern ' + pi + ': ' + a.length + ' cells, expected ' + nh * nc);
    decoded[pi] = a;
    return a;
  }
  // How good a relative value is, 1 at the median: higher values are better unless the metric is a time.
  function goodness(v, hib) { return hib ? v / 100 : (v > 0 ? 100 / v : 10); }
  function hslToRgb(h, s, l) {
    var c = (1 - Math.abs(2 * l - 1)) * s, x = c * (1 - Math.abs((h / 60) % 2 - 1)), m = l - c / 2;
    var r = h < 60 ? c : h < 120 ? x : 0, g = h < 60 ? x : h < 180 ? c : x;
    return [Math.round((r + m) * 255), Math.round((g + m) * 255), Math.round(m * 255)];
  }
  var luts = {};
  function lut(hib) {
    var key = hib ? 'hi' : 'lo';
    if (luts[key]) return luts[key];
    var t = [];
    for (var v = 0; v < 255; v++) {
      var x = Math.max(0, Math.min(1, (goodness(v, hib) - 0.7) / 0.3));  // 0.7 and below red, 1 green
      t.push(hslToRgb(x * 120, 0.72, 0.42));  // one lightness: 1 % either side of the median looks alike
    }
    t.push([232, 232, 232]);  // 255: no sample
    luts[key] = t;
    return t;
  }
  function latestGoodness(pi, h) {
    var c = cellsOf(pi), hib = pats[pi].higherIsBetter;
    for (var k = nc - 1; k >= 0; k--) { var v = c[h * nc + k]; if (v !== 255) return goodness(v, hib); }
    return Infinity;
  }
  function sortRows() {
    var how = sortSel ? sortSel.value : 'name';
    order = [];
    for (var h = 0; h < nh; h++) order.push(h);
    if (how === 'now' && pats.length) {
      var g = order.map(function (h) { return latestGoodness(current, h); });
      order.sort(function (a, b) { return g[a] - g[b] || a - b; });
    } else if (how === 'drift' && pats.length) {
      var rank = {};
      pats[current].drift.forEach(function (r, i) { rank[r[0]] = i; });
      order.sort(function (a, b) {
        var ra = rank[a] === undefined ? 1e9 : rank[a], rb = rank[b] === undefined ? 1e9 : rank[b];
        return ra - rb || a - b;
      });
    } else if (how === 'quarantine') {
      order.sort(function (a, b) { return (quarantined[b] ? 1 : 0) - (quarantined[a] ? 1 : 0) || a - b; });
    }
    rowOf = [];
    order.forEach(function (h, r) { rowOf[h] = r; });
  }

  function draw() {
    if (!canvas || !canvas.getContext) return;
    var rowH = Math.max(2, Math.min(14, Math.floor(1200 / Math.max(1, nh))));
    var colW = Math.max(2, Math.min(16, Math.floor(1100 / Math.max(1, nc))));
    var left = rowH >= 9 ? 120 : 12, top = 28;
    canvas.width = left + nc * colW + 80;  // room for the last date label
    canvas.height = top + nh * rowH + 4;
    layout = { rowH: rowH, colW: colW, left: left, top: top };
    var ctx = canvas.getContext('2d');
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    var drawn = 0;
    if (pats.length && nh && nc) {
      var c = cellsOf(current), t = lut(pats[current].higherIsBetter);
      var img = ctx.createImageData(nc, nh), px = img.data;
      for (var r = 0; r < nh; r++) {
        var h = order[r], base = h * nc;
        for (var k = 0; k < nc; k++) {
          var v = c[base + k], rgb = t[v], o = (r * nc + k) * 4;
          if (v !== 255) drawn++;
          px[o] = rgb[0]; px[o + 1] = rgb[1]; px[o + 2] = rgb[2]; px[o + 3] = 255;
        }
      }
      var off = document.createElement('canvas');
      off.width = nc;
      off.height = nh;
      off.getContext('2d').putImageData(img, 0, 0);
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(off, left, top, nc * colW, nh * rowH);
    }
    // Quarantined hosts: a red mark left of the row.
    ctx.fillStyle = '#c62828';
    for (var q in quarantined) ctx.fillRect(left - 6, top + rowOf[q] * rowH, 4, Math.max(1, rowH));
    // Dates over the columns, about every 90 px.
    ctx.fillStyle = '#333333';
    ctx.font = '10px sans-serif';
    ctx.textBaseline = 'bottom';
    var every = Math.max(1, Math.ceil(90 / colW));
    for (var j = 0; j < nc; j += every) {
      ctx.fillRect(left + j * colW, top - 4, 1, 4);
      ctx.fillText(DS.fmtTime(cols[j][0]).slice(0, d.widthMs >= 864e5 ? 10 : 16), left + j * colW + 2, top - 6);
    }
    if (left > 12) {
      ctx.textAlign = 'right';
      ctx.textBaseline = 'middle';
      ctx.font = Math.min(11, rowH - 1) + 'px sans-serif';
      for (var rr = 0; rr < nh; rr++) {
        var name = hosts[order[rr]];
        ctx.fillText(name.length > 18 ? name.slice(0, 17) + '\u2026' : name, left - 8, top + rr * rowH + rowH / 2);
      }
      ctx.textAlign = 'left';
    }
    canvas.dataset.cellsDrawn = String(drawn);
    body.dataset.fleetRows = String(nh);
    body.dataset.fleetColumns = String(nc);
    body.dataset.fleetCellsDrawn = String(drawn);
    body.dataset.fleetPattern = String(current);
  }

  function cellAt(e) {
    if (!layout) return null;
    var rect = canvas.getBoundingClientRect();
    var x = (e.clientX - rect.left) * canvas.width / rect.width - layout.left;
    var y = (e.clientY - rect.top) * canvas.height / rect.height - layout.top;
    var k = Math.floor(x / layout.colW), r = Math.floor(y / layout.rowH);
    if (x < 0 || y < 0 || k >= nc || r >= nh) return null;
    return { host: order[r], col: k };
  }
  // The host's figure in a column, read back from its relative value: rounded to 1 % of the median.
  function valueAt(pi, h, k) {
    var v = cellsOf(pi)[h * nc + k], s = d.hostSku[h];
    var med = s >= 0 && pats[pi].medians[s] ? pats[pi].medians[s][k] : null;
    if (v === 255 || med === null || med === undefined) return null;
    return { rel: v, value: v / 100 * med, median: med };
  }
  if (canvas) {
    canvas.addEventListener('mousemove', function (e) {
      var at = cellAt(e);
      if (!tip) return;
      if (!at || !pats.length) { tip.textContent = ''; return; }
      var p = pats[current], v = valueAt(current, at.host, at.col);
      var text = hosts[at.host] + ' · ' + DS.fmtTime(cols[at.col][0]) + ': ';
      text += v ? DS.fmtNum(v.value) + ' ' + p.unit + ' (' + v.rel + (v.rel >= 254 ? '+' : '') + ' % of the SKU median ' +
        DS.fmtNum(v.median) + ')' : 'no sample';
      if (quarantined[at.host]) text += ' · QUARANTINED';
      tip.textContent = text;
    });
    canvas.addEventListener('click', function (e) { var at = cellAt(e); if (at) showHost(at.host, true); });
  }

  function fmtPct(v) { return v === null || v === undefined ? '—' : (v >= 0 ? '+' : '') + DS.fmtNum(v) + ' %'; }
  function checkText(h) {
    var c = (d.checks || [])[h];
    return c ? c[5] : 'no checks';
  }

  var driftAll = false;
  function drawDrift() {
    var table = document.getElementById('fl-drift');
    var note = document.getElementById('fl-drift-note');
    if (!table || !pats.length) { body.dataset.driftRows = '0'; return; }
    var p = pats[current], tbody = table.tBodies[0];
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    var rows = driftAll ? p.drift : p.drift.slice(0, 50);
    rows.forEach(function (r) {
      var tr = document.createElement('tr');
      var cells = [hosts[r[0]], d.hostSku[r[0]] >= 0 ? d.skus[d.hostSku[r[0]]] : 'unknown', String(r[1]),
        DS.fmtNum(r[2]) + ' ' + p.unit, DS.fmtNum(r[3]) + ' ' + p.unit, fmtPct(r[4]), fmtPct(r[5]), checkText(r[0])];
      cells.forEach(function (text, i) {
        var td = document.createElement('td');
        if (i === 0) {
          var a = document.createElement('a');
          a.href = '#';
          a.textContent = text;
          a.addEventListener('click', function (ev) { ev.preventDefault(); showHost(r[0], true); });
          td.appendChild(a);
        } else {
          td.textContent = text;
        }
        if (i >= 2 && i <= 6) td.className = 'num';
        var worse = p.higherIsBetter ? -r[4] : r[4];
        if (i === 5 && worse > 10) td.className = 'num fail';
        if (i === 7 && quarantined[r[0]]) td.className = 'fail';
        tr.appendChild(td);
      });
      tbody.appendChild(tr);
    });
    if (note) {
      note.textContent = p.drift.length + ' host(s) with at least 4 columns, worst first' +
        (driftAll || p.drift.length <= 50 ? '' : ' (the first 50 shown)') + '. The fleet median itself drifted ' +
        fmtPct(p.fleetDrift) + ' over the same time; "vs fleet" is a host\'s drift against it.';
    }
    var all = document.getElementById('fl-drift-all');
    if (all) all.hidden = driftAll || p.drift.length <= 50;
    body.dataset.driftRows = String(rows.length);
  }

  function showHost(h, scroll) {
    var title = document.getElementById('fl-host-title'), info = document.getElementById('fl-host-info');
    var chartCanvas = document.getElementById('fl-host-chart');
    if (h < 0 || h >= nh || !title) return;
    shownHost = h;
    title.className = quarantined[h] ? 'fail' : '';
    title.textContent = hosts[h] + (quarantined[h] ? ' — QUARANTINED' : '') + ' · SKU ' +
      (d.hostSku[h] >= 0 ? d.skus[d.hostSku[h]] : 'unknown');
    var points = 0;
    if (pats.length && chartCanvas && typeof Chart !== 'undefined') {
      var p = pats[current], mine = [], median = [];
      for (var k = 0; k < nc; k++) {
        var v = valueAt(current, h, k);
        var x = cols[k][0];
        if (v) { mine.push([x, v.value]); median.push([x, v.median]); }
      }
      points = mine.length;
      var spec = { kind: 'time', title: p.title, yTitle: p.unit,
        series: [{ label: hosts[h], points: mine, color: 0 },
                 { label: 'fleet median of its SKU', points: median, dashed: true, color: 9 }] };
      try {
        if (hostChart) hostChart.destroy();
        hostChart = new Chart(chartCanvas.getContext('2d'), DS.build(spec));
      } catch (err) {
        DS.errors.push('host chart: ' + String(err));
      }
    }
    if (info) {
      var c = (d.checks || [])[h], text = 'Last ' + d.n + ' checks (oldest first): ' + checkText(h) + '.';
      if (c && c[2]) text += ' Last failure ' + c[2] + (c[3] ? ' (rule ' + c[3] + ')' : '') + ': ' + c[4] + '.';
      if (pats.length) {
        var drift = null;
        pats[current].drift.forEach(function (r) { if (r[0] === h) drift = r; });
        text += drift ? ' Drift ' + fmtPct(drift[4]) + ', vs fleet ' + fmtPct(drift[5]) + '.' : '';
        text += ' Values are read back from the heatmap (1 % of the median); the history database has the exact ones.';
      }
      info.textContent = text;
    }
    body.dataset.hostShown = String(h);
    body.dataset.hostPoints = String(points);
    DS.mark();
    if (scroll && title.scrollIntoView) title.scrollIntoView();
  }

  function refresh() {
    sortRows();
    draw();
    drawDrift();
    if (shownHost >= 0) showHost(shownHost, false);
  }
  if (patSel) patSel.addEventListener('change', function () { current = Number(patSel.value) || 0; refresh(); });
  if (sortSel) sortSel.addEventListener('change', refresh);
  var all = document.getElementById('fl-drift-all');
  if (all) all.addEventListener('click', function () { driftAll = true; drawDrift(); });
  var list = document.getElementById('fl-hosts');
  if (list && nh <= 5000) {
    hosts.forEach(function (name) { var o = document.createElement('option'); o.value = name; list.appendChild(o); });
  }
  if (hostIn) hostIn.addEventListener('change', function () {
    var h = hosts.indexOf(hostIn.value);
    if (h >= 0) showHost(h, true);
  });

  // The exclude file: copy (the clipboard API, or a selected text area where it is refused) and download.
  var excludeText = d.excludeFile || '';
  var status = document.getElementById('fl-copy-status');
  function say(text) { if (status) status.textContent = text; }
  var copy = document.getElementById('fl-copy');
  if (copy) copy.addEventListener('click', function () {
    function fallback() {
      var ta = document.createElement('textarea');
      ta.value = excludeText;
      document.body.appendChild(ta);
      ta.select();
      var ok = false;
      try { ok = document.execCommand('copy'); } catch (e) { ok = false; }
      document.body.removeChild(ta);
      say(ok ? 'copied' : 'select the line above and copy it');
    }
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(excludeText).then(function () { say('copied'); }, fallback);
    } else {
      fallback();
    }
  });
  var download = document.getElementById('fl-download');
  if (download) download.addEventListener('click', function () {
    var a = document.createElement('a');
    a.href = 'data:text/plain;charset=utf-8,' + encodeURIComponent(excludeText);
    a.download = 'quarantine-exclude.txt';
    document.body.appendChild(a);
    a.click();
    document.body.removeChild(a);
  });

  // #pattern=<index>&sort=<how>&host=<name> restores a view.
  var params = new URLSearchParams(location.hash.replace(/^#/, ''));
  if (params.has('pattern')) {
    var pi = Number(params.get('pattern'));
    if (pi >= 0 && pi < pats.length) { current = pi; if (patSel) patSel.value = String(pi); }
  }
  if (params.has('sort') && sortSel) sortSel.value = params.get('sort');
  try {
    refresh();
  } catch (err) {
    DS.errors.push('fleet heatmap: ' + String(err));
  }
  // The host asked for, else the worst drift of the pattern, so the panel is not empty on opening.
  if (params.has('host')) {
    showHost(hosts.indexOf(params.get('host')), false);
  } else if (pats.length && pats[current].drift.length) {
    showHost(pats[current].drift[0][0], false);
  }
  body.dataset.fleetReadyMs = String(Math.round(performance.now()));
})();
