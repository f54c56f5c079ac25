// dsperf dashboard: the filters (label, backend, collective, only series that regressed now). Each
// series is a card "card-<index>" whose chart charts.js has drawn; filtering hides cards. Filter
// values come from the page data and are put into the page with textContent only. The filters live in
// the URL's fragment (#label=a&backend=gloo&collective=allreduce&regressed=1), so a filtered view can
// be linked and is restored on load.
(function () {
  var d = DS.data.dashboard;
  if (!d) return;
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
    if (onlyRegressed) onlyRegressed.checked = params.get('regressed') === '1';
  }
  function toHash() {
    var params = new URLSearchParams();
    fields.forEach(function (f) { var v = chosen(f); if (v !== null) params.set(f, v); });
    if (onlyRegressed && onlyRegressed.checked) params.set('regressed', '1');
    var h = params.toString();
    try { history.replaceState(null, '', h ? '#' + h : location.pathname + location.search); } catch (e) { /* file: URLs in some browsers */ }
  }
  function apply(ev) {
    if (ev) toHash();
    var want = {};
    fields.forEach(function (f) { want[f] = chosen(f); });
    var shown = 0, regressedShown = 0;
    (d.series || []).forEach(function (s, i) {
      var ok = fields.every(function (f) { return want[f] === null || s[f] === want[f]; });
      if (ok && onlyRegressed && onlyRegressed.checked) ok = !!s.latestRegressed;
      var card = document.getElementById('card-' + i);
      if (card) card.hidden = !ok;
      if (ok) { shown++; if (s.latestRegressed) regressedShown++; }
    });
    Array.prototype.forEach.call(document.querySelectorAll('section'), function (sec) {
      var cards = sec.querySelectorAll('.card');
      if (!cards.length) return;
      sec.hidden = !Array.prototype.some.call(cards, function (c) { return !c.hidden; });
    });
    var count = document.getElementById('f-count');
    if (count) {
      count.textContent = shown + ' of ' + (d.series || []).length + ' series shown' +
        (regressedShown ? ', ' + regressedShown + ' regressed at the latest run' : '');
    }
    document.body.dataset.seriesShown = String(shown);
  }
  DS.applyFilters = apply;
  fromHash();
  apply();
  window.addEventListener('hashchange', function () { fromHash(); apply(); });
})();
