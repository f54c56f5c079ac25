// dsperf report pages: draws the chart specs of the page's JSON block with Chart.js (embedded above)
// and records the outcome on <body> (data-charts-rendered, data-chart-errors, data-render-done) for
// the browser tests. Text from the data is only ever drawn on canvases or set with textContent.
//
// Chart spec (made by reports/html/*.cpp):
//   canvas   id of the <canvas>
//   kind     "size": x is a size in bytes on a log-2 axis, series.points = [[x, y], ...]
//            "category": x is spec.labels, series.values = [y, ...] (null = no value)
//            "time": x is a time in ms since the epoch, series.points = [[t, y], ...]
//   title, xTitle, yTitle, yLog (log-10 y axis), bar (bars instead of lines), stacked, yPercent
//   series   [{label, points | values, dashed, color (palette index), marks (bool per point: drawn
//            as a large red point, e.g. a regression)}]
'use strict';
var DS = (function () {
  var DS = { rendered: 0, points: 0, errors: [], charts: [] };
  window.addEventListener('error', function (e) { DS.errors.push(String(e.message)); DS.mark(); });
  DS.palette = ['#2f6fdb', '#e8710a', '#1d7a3a', '#c62828', '#7b3fbf', '#00838f', '#ad1457', '#5d4037',
                '#827717', '#37474f', '#0277bd', '#ef6c00'];
  DS.color = function (i) { return DS.palette[((i % DS.palette.length) + DS.palette.length) % DS.palette.length]; };
  DS.fmtBytes = function (v) {
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    var u = 0;
    while (Math.abs(v) >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    return (Math.round(v) === v ? String(v) : v.toFixed(1)) + ' ' + units[u];
  };
  DS.fmtNum = function (v) {
    if (v === null || v === undefined || !isFinite(v)) return '';
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
    return String(Number(v.toPrecision(4)));
  };
  DS.fmtTime = function (ms) { return new Date(ms).toISOString().replace('T', ' ').slice(0, 16); };
  try {
    DS.data = JSON.parse(document.getElementById('ds-data').textContent);
  } catch (e) {
    DS.data = { charts: [] };
    DS.errors.push('the page data could not be read: ' + e.message);
  }

  // A log-2 size axis: min and max widened to powers of two, one tick per power (or every k-th, so at
  // most 14 ticks), labelled 8 B, 1 KiB, 1 MiB...
  function sizeAxis(spec, xs) {
    var lo = Math.pow(2, Math.floor(Math.log2(Math.min.apply(null, xs))));
    var hi = Math.pow(2, Math.ceil(Math.log2(Math.max.apply(null, xs))));
    if (hi <= lo) hi = lo * 2;
    return {
      type: 'logarithmic', min: lo, max: hi, bounds: 'data',
      title: { display: true, text: spec.xTitle || 'size' },
      afterBuildTicks: function (scale) {
        var e0 = Math.round(Math.log2(lo)), e1 = Math.round(Math.log2(hi));
        var step = Math.max(1, Math.ceil((e1 - e0) / 14));
        var ticks = [];
        for (var e = e0; e <= e1; e += step) ticks.push({ value: Math.pow(2, e), major: true });
        scale.ticks = ticks;
      },
      ticks: { autoSkip: false, maxRotation: 50, callback: function (v) { return DS.fmtBytes(v); } }
    };
  }

  // A time axis (ms since the epoch, UTC) that spans the data (a 3% margin each side; a lone point
  // gets a minute around it), with ticks on round steps inside it: seconds, minutes, hours, days,
  // weeks or months, at most about 10; labelled with the date, and the time of day (to the second
  // when the step is under a minute) when the step is under a day.
  function timeAxis(spec, datasets) {
    var xs = [];
    datasets.forEach(function (d) { d.data.forEach(function (p) { if (isFinite(p.x)) xs.push(p.x); }); });
    var lo = xs.length ? Math.min.apply(null, xs) : 0, hi = xs.length ? Math.max.apply(null, xs) : 1;
    var S = 1e3, M = 60 * S, H = 60 * M, D = 24 * H;
    var pad = hi > lo ? 0.03 * (hi - lo) : 30 * S;
    var min = lo - pad, max = hi + pad;
    var steps = [S, 5 * S, 15 * S, 30 * S, M, 5 * M, 15 * M, 30 * M, H, 3 * H, 6 * H, 12 * H, D, 2 * D, 7 * D,
                 14 * D, 30 * D, 91 * D, 365 * D];
    var step = steps[steps.length - 1];
    for (var i = 0; i < steps.length; i++) { if ((max - min) / steps[i] <= 10) { step = steps[i]; break; } }
    return {
      type: 'linear', min: min, max: max, title: { display: true, text: spec.xTitle || 'run start (UTC)' },
      afterBuildTicks: function (scale) {
        var t = [];
        for (var v = Math.ceil(min / step) * step; v <= max; v += step) t.push({ value: v });
        scale.ticks = t;
      },
      ticks: { autoSkip: false, maxRotation: 50, callback: function (v) {
        var text = new Date(v).toISOString().replace('T', ' ');
        return step >= D ? text.slice(0, 10) : step < M ? text.slice(0, 19) : text.slice(0, 16);
      } }
    };
  }

  function pointsOf(spec, s) {
    var pts = [];
    (s.points || []).forEach(function (p) {
      var ok = p[1] !== null && isFinite(p[1]) && (!spec.yLog || p[1] > 0) && (spec.kind !== 'size' || p[0] > 0);
      pts.push({ x: p[0], y: ok ? p[1] : null });
    });
    return pts;
  }

  DS.build = function (spec) {
    var datasets = (spec.series || []).map(function (s, i) {
      var c = DS.color(s.color === undefined ? i : s.color);
      var data = spec.kind === 'category' ? (s.values || []).map(function (v) {
        return v === null || !isFinite(v) || (spec.yLog && v <= 0) ? null : v;
      }) : pointsOf(spec, s);
      var ds = { label: s.label, data: data, borderColor: c, backgroundColor: spec.bar ? c : c + '33',
                 borderWidth: spec.bar ? 0 : 2, spanGaps: true, pointRadius: 2.5, pointHoverRadius: 5 };
      if (s.dashed) ds.borderDash = [6, 4];
      if (s.marks) {
        ds.pointRadius = s.marks.map(function (m) { return m ? 6 : 2.5; });
        ds.pointBackgroundColor = s.marks.map(function (m) { return m ? '#c62828' : c; });
        ds.pointBorderColor = s.marks.map(function (m) { return m ? '#c62828' : c; });
        ds.pointStyle = s.marks.map(function (m) { return m ? 'triangle' : 'circle'; });
      }
      if (s.stack) ds.stack = s.stack;
      return ds;
    });
    var x;
    if (spec.kind === 'size') {
      var xs = [];
      datasets.forEach(function (d) { d.data.forEach(function (p) { if (p.x > 0) xs.push(p.x); }); });
      if (!xs.length) xs = [1, 2];
      x = sizeAxis(spec, xs);
    } else if (spec.kind === 'time') {
      x = timeAxis(spec, datasets);
    } else {
      x = { type: 'category', title: { display: !!spec.xTitle, text: spec.xTitle || '' }, stacked: !!spec.stacked,
            ticks: { autoSkip: false, maxRotation: 60 } };
    }
    var y = { type: spec.yLog ? 'logarithmic' : 'linear', title: { display: true, text: spec.yTitle || '' },
              stacked: !!spec.stacked, beginAtZero: !spec.yLog,
              ticks: { callback: function (v) {
                if (spec.yLog) {
                  var m = v / Math.pow(10, Math.floor(Math.log10(v)));
                  if ([1, 2, 5].indexOf(Math.round(m * 1000) / 1000) < 0) return '';
                }
                return DS.fmtNum(v) + (spec.yPercent ? ' %' : '');
              } } };
    return {
      type: spec.bar ? 'bar' : 'line',
      data: { labels: spec.kind === 'category' ? spec.labels : undefined, datasets: datasets },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, parsing: spec.kind === 'category',
       
        interaction: { mode: spec.kind === 'category' ? 'index' : 'nearest', intersect: false },
        plugins: {
          title: { display: !!spec.title, text: spec.title },
          legend: { position: 'bottom' },
          tooltip: { callbacks: {
            title: function (items) {
              if (!items.length) return '';
              var raw = items[0].raw;
              if (spec.kind === 'size') return DS.fmtBytes(raw.x);
              if (spec.kind === 'time') return DS.fmtTime(raw.x);
              return items[0].label;
            },
            label: function (item) {
              var v = spec.kind === 'category' ? item.raw : item.raw.y;
              var extra = spec.tooltips && spec.tooltips[item.datasetIndex] ? spec.tooltips[item.datasetIndex][item.dataIndex] : '';
              return item.dataset.label + ': ' + DS.fmtNum(v) + (spec.yPercent ? ' %' : '') + (extra ? ' (' + extra + ')' : '');
            } } }
        },
        scales: { x: x, y: y }
      }
    };
  };

  // Draws one spec; a chart counts as rendered once Chart.js has laid out a non-empty plot area.
  DS.draw = function (spec) {
    try {
      var canvas = document.getElementById(spec.canvas);
      if (!canvas) throw new Error('no canvas ' + spec.canvas);
      var chart = new Chart(canvas.getContext('2d'), DS.build(spec));
      DS.charts.push(chart);
      var area = chart.chartArea;
      if (!area || !(area.right - area.left > 0) || !(area.bottom - area.top > 0)) {
        DS.errors.push((spec.title || spec.canvas) + ': drawn without a plot area');
        return null;
      }
      DS.rendered++;
      chart.data.datasets.forEach(function (d, i) { DS.points += chart.getDatasetMeta(i).data.length; });
      return chart;
    } catch (e) {
      DS.errors.push((spec.title || spec.canvas) + ': ' + e.message);
      return null;
    }
  };

  // Draws a chart declared with PageBuilder::lazyChart, once; true when it is (now) drawn.
  DS.lazyDrawn = {};
  DS.lazyRendered = 0;
  DS.drawLazy = function (canvasId) {
    if (DS.lazyDrawn[canvasId]) return true;
    var spec = (DS.data.lazyCharts || {})[canvasId];
    if (!spec || typeof Chart === 'undefined') return false;
    DS.lazyDrawn[canvasId] = true;
    var ok = DS.draw(spec) !== null;
    if (ok) {  // counted apart: data-charts-rendered stays the count of charts drawn on load
      DS.rendered--;
      DS.lazyRendered++;
    }
    DS.mark();
    return ok;
  };

  DS.mark = function () {
    var b = document.body;
    b.dataset.chartsRendered = String(DS.rendered);
    b.dataset.pointsDrawn = String(DS.points);
    b.dataset.chartErrors = String(DS.errors.length);
    b.dataset.lazyChartsRendered = String(DS.lazyRendered);
    var box = document.getElementById('ds-errors');
    if (box && DS.errors.length) {
      box.hidden = false;
      box.textContent = 'Some charts could not be drawn (the tables still hold every number):\n' + DS.errors.join('\n');
    }
  };
  DS.finish = function () {
    DS.mark();
    document.body.dataset.renderDone = '1';
  };

  if (typeof Chart === 'undefined') {
    DS.errors.push('Chart.js did not load');
  } else {
    (DS.data.charts || []).forEach(DS.draw);
  }
  return DS;
})();
