// dsperf dashboard: the overview heatmap (series x run) and the filters (label, backend, collective,
// a text match on the series, only series that regressed now). Each series is a card "card-<index>"
// (folded, with its chart drawn on opening, when there are many). Filtering hides cards and overview
// rows. Values from the page data go into the page with textContent only. The filters live in the
// URL's fragment (#label=a&backend=gloo&collective=allreduce&q=1%20MiB&regressed=1), so a filtered
// view can be linked and is restored on load; #card=<index> opens that card.
(function () {
  var d = DS.data.dashboard;
  if (!d) return;
  var series = d.series || [];
  var fields = ['label', 'backend', 'collective'];
  var lists = { label: d.labels || [], backend: d.backends || [], collective: d.collectives || [] };
  fields.forEach(function (f) {
    var select = document.getElementById('f-' + f);
    if (!select) return;
    lists[f].forEach(function (v, i) {
      var o = document.createElement('option');
      o.value = String(i);
      o.textContent = v === '' ? '(none)' : v;
      select.appendChild(o);
    });
    select.addEventListener('change', apply);
  });
  var onlyRegressed = document.getElementById('f-regressed');
  if (onlyRegressed) onlyRegressed.addEventListener('change', apply);
  var text = document.getElementById('f-text');
  if (text) text.addEventListener('input', apply);

  // The overview: a table, one row per series, one cell per run.
  var rows = [];
  var heat = document.getElementById('heatmap');
  if (heat && series.length) {
    var runs = d.runs || [];
    var threshold = d.thresholdPct || 0;
    var table = document.createElement('table');
    table.className = 'heat';
    var head = document.createElement('tr');
    var corner = document.createElement('th');
    corner.textContent = series.length + ' series × ' + runs.length + ' runs';
    head.appendChild(corner);
    var every = Math.max(1, Math.ceil(runs.length / 12));
    runs.forEach(function (r, k) {
      var th = document.createElement('th');
      th.className = 'run';
      th.textContent = k % every === 0 ? String(r.time).slice(5, 10) : '';
      th.title = r.time + ' · run ' + r.runId;
      head.appendChild(th);
    });
    table.appendChild(head);
    var cellCount = 0;
    series.forEach(function (s, i) {
      var tr = document.createElement('tr');
      var name = document.createElement('th');
      var a = document.createElement('a');
      a.href = '#card=' + i;
      a.textContent = s.title;
      a.title = s.context;
      name.appendChild(a);
      if (s.latestRegressed) name.className = 'fail';
      tr.appendChild(name);
      var byRun = {};
      (s.cells || []).forEach(function (c) { byRun[c[0]] = c; });
      runs.forEach(function (r, k) {
        var td = document.createElement('td');
        var c = byRun[k];
        if (c) {
          cellCount++;
          var change = c[1];
          if (change === null) {
            td.className = 'none';
            td.title = r.time + ' · no baseline yet';
          } else {
            var worse = s.higherIsBetter ? -change : change;
            var a2 = Math.min(1, Math.abs(change) / 25);
            if (Math.abs(change) > threshold) {
              td.style.background = worse > 0 ? 'rgba(198,40,40,' + a2 + ')' : 'rgba(21,101,192,' + a2 + ')';
            }
            td.title = r.time + ' · ' + (change >= 0 ? '+' : '') + change + ' % against the baseline' +
              (c[2] === 2 ? ' · REGRESSED' : c[2] === 1 ? ' · improved' : '');
          }
          if (c[2] === 2) td.textContent = '▲';
          if (c[2] === 1) td.textContent = '▼';
          if (c[2]) td.className = c[2] === 2 ? 'flag bad' : 'flag good';
        } else {
          td.className = 'empty';
        }
        tr.appendChild(td);
      });
      table.appendChild(tr);
      rows.push(tr);
    });
    heat.appendChild(table);
    document.body.dataset.heatmapRows = String(rows.length);
    document.body.dataset.heatmapCells = String(cellCount);
  }

  function openCard(i) {
    var card = document.getElementById('card-' + i);
    if (!card) return false;
    if (card.tagName === 'DETAILS') card.open = true;
    drawCard(card);
    if (card.scrollIntoView) card.scrollIntoView();
    document.body.dataset.cardOpened = String(i);
    return true;
  }
  function drawCard(card) {
    Array.prototype.forEach.call(card.querySelectorAll('canvas'), function (c) { if (DS.drawLazy) DS.drawLazy(c.id); });
    var drawn = Object.keys(DS.lazyDrawn || {}).length;
    document.body.dataset.lazyChartsDrawn = String(drawn);
  }
  Array.prototype.forEach.call(document.querySelectorAll('details.card'), function (card) {
    card.addEventListener('toggle', function () { if (card.open) drawCard(card); });
  });

  function chosen(f) {
    var select = document.getElementById('f-' + f);
    if (!select || select.value === 'all') return null;
    return lists[f][Number(select.value)];
  }
  function fromHash() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ''));
    fields.forEach(function (f) {
      var select = document.getElementById('f-' + f);
      if (!select || !params.has(f)) return;
      var i = lists[f].indexOf(params.get(f));
      select.value = i < 0 ? 'all' : String(i);
    });
    if (text) text.value = params.get('q') || '';
    if (onlyRegressed) onlyRegressed.checked = params.get('regressed') === '1';
    return params.get('card');
  }
  function toHash() {
    var params = new URLSearchParams();
    fields.forEach(function (f) { var v = chosen(f); if (v !== null) params.set(f, v); });
    if (text && text.value) params.set('q', text.value);
    if (onlyRegressed && onlyRegressed.checked) params.set('regressed', '1');
    var h = params.toString();
    try { history.replaceState(null, '', h ? '#' + h : location.pathname + location.search); } catch (e) { /* file: URLs in some browsers */ }
  }
  function apply(ev) {
    if (ev) toHash();
    var want = {};
    fields.forEach(function (f) { want[f] = chosen(f); });
    var q = text && text.value ? text.value.toLowerCase() : '';
    var shown = 0, regressedShown = 0;
    series.forEach(function (s, i) {
      var ok = fields.every(function (f) { return want[f] === null || s[f] === want[f]; });
      if (ok && onlyRegressed && onlyRegressed.checked) ok = !!s.latestRegressed;
      if (ok && q) ok = (s.title + ' ' + s.context).toLowerCase().indexOf(q) >= 0;
      var card = document.getElementById('card-' + i);
      if (card) card.hidden = !ok;
      if (rows[i]) rows[i].hidden = !ok;
      if (ok) { shown++; if (s.latestRegressed) regressedShown++; }
    });
    Array.prototype.forEach.call(document.querySelectorAll('section'), function (sec) {
      var cards = sec.querySelectorAll('.card');
      if (!cards.length) return;
      sec.hidden = !Array.prototype.some.call(cards, function (c) { return !c.hidden; });
    });
    var count = document.getElementById('f-count');
    if (count) {
      count.textContent = shown + ' of ' + series.length + ' series shown' +
        (regressedShown ? ', ' + regressedShown + ' regressed now' : '');
    }
    document.body.dataset.seriesShown = String(shown);
  }
  DS.applyFilters = apply;
  DS.openCard = openCard;
  var card = fromHash();
  apply();
  if (card !== null) openCard(card);
  window.addEventListener('hashchange', function () {
    var c = fromHash();
    apply();
    if (c !== null) openCard(c);
  });
})();
