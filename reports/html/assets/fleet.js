// Fleet heatmaps (dsdiag fleet mode): draws each spec of DS.data.fleetHeatmaps (reports/html/fleet_html.h
// describes the fields) on its canvas: one cell per host pair that ran, coloured by bandwidth relative
// to the fleet median; failed, timed-out and skipped pairs in their own colours; pairs not tested
// blank. Host names are drawn on the canvas or set with textContent, never parsed as HTML. Records
// body data-heatmaps-drawn and canvas data-cells-drawn for the browser tests.
(function() {
var maps = (DS.data && DS.data.fleetHeatmaps) || [];
var drawn = 0;
var kStatus = ['measured', 'failed', 'timed out', 'skipped'];
var kStatusColour = [null, '#5b0000', '#7b3fbf', '#b0b0b0'];
// 0 (red) .. 0.5 (orange-yellow) .. 1 and above (green).
function ratioColour(r) {
  var x = Math.max(0, Math.min(1, r));
  return 'hsl(' + Math.round(x * 120) + ',72%,' + (x >= 1 ? 36 : 46) + '%)';
}
function drawOne(m) {
  var canvas = document.getElementById(m.canvas);
  if (!canvas || !canvas.getContext) return false;
  var n = m.hosts.length;
  var cell = Math.max(1, Math.min(28, Math.floor(900 / Math.max(1, n))));
  var margin = n <= 80 ? 96 : 8;  // names on the axes only while they can be read
  var side = margin + n * cell;
  canvas.width = side;
  canvas.height = side;
  var ctx = canvas.getContext('2d');
  ctx.fillStyle = '#ffffff';
  ctx.fillRect(0, 0, side, side);
  ctx.strokeStyle = '#d0d0d0';
  ctx.strokeRect(margin - 0.5, margin - 0.5, n * cell + 1, n * cell + 1);
  // Suspect hosts' rows and columns as a faint red band, so that one host among thousands stands out
  // even where its cells are a pixel wide.
  ctx.fillStyle = 'rgba(198, 40, 40, 0.14)';
  for (var s = 0; s < n; s++) {
    if (!m.suspect[s]) continue;
    var band = Math.max(cell, 3);
    ctx.fillRect(margin, margin + s * cell - (band - cell) / 2, n * cell, band);
    ctx.fillRect(margin + s * cell - (band - cell) / 2, margin, band, n * cell);
  }
  var cells = m.cells, at = {}, count = 0;
  for (var k = 0; k + 3 < cells.length; k += 4) {
    var i = cells[k], j = cells[k + 1], st = cells[k + 2], ratio = cells[k + 3] / 1000;
    ctx.fillStyle = st === 0 ? ratioColour(ratio) : kStatusColour[st];
    ctx.fillRect(margin + j * cell, margin + i * cell, cell, cell);
    ctx.fillRect(margin + i * cell, margin + j * cell, cell, cell);
    if (st !== 0 && st !== 3 && cell >= 8) {  // a cross on failures, when the cell is large enough
      ctx.strokeStyle = '#ffffff';
      [[i, j], [j, i]].forEach(function(p) {
        var x = margin + p[1] * cell, y = margin + p[0] * cell;
        ctx.beginPath();
        ctx.moveTo(x + 2, y + 2);
        ctx.lineTo(x + cell - 2, y + cell - 2);
        ctx.moveTo(x + cell - 2, y + 2);
        ctx.lineTo(x + 2, y + cell - 2);
        ctx.stroke();
      });
    }
    at[i * n + j] = k;
    at[j * n + i] = k;
    count++;
  }
  // Suspect hosts: a red mark on both axes.
  ctx.fillStyle = '#c62828';
  for (var h = 0; h < n; h++) {
    if (!m.suspect[h]) continue;
    ctx.fillRect(margin - 6, margin + h * cell, 4, Math.max(1, cell));
    ctx.fillRect(margin + h * cell, margin - 6, Math.max(1, cell), 4);
  }
  if (margin > 8) {
    ctx.fillStyle = '#333333';
    ctx.font = Math.max(7, Math.min(11, cell - 1)) + 'px sans-serif';
    ctx.textBaseline = 'middle';
    for (var a = 0; a < n; a++) {
      var name = m.hosts[a].length > 14 ? m.hosts[a].slice(0, 13) + '\u2026' : m.hosts[a];
      ctx.textAlign = 'right';
      ctx.fillText(name, margin - 8, margin + a * cell + cell / 2);
      ctx.save();
      ctx.translate(margin + a * cell + cell / 2, margin - 8);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = 'left';
      ctx.fillText(name, 0, 0);
      ctx.restore();
    }
  }
  canvas.dataset.cellsDrawn = String(count);
  var tip = document.getElementById(m.tip);
  canvas.addEventListener('mousemove', function(e) {
    if (!tip) return;
    var rect = canvas.getBoundingClientRect();
    var x = (e.clientX - rect.left) * canvas.width / rect.width - margin;
    var y = (e.clientY - rect.top) * canvas.height / rect.height - margin;
    var c = Math.floor(x / cell), r = Math.floor(y / cell);
    if (x < 0 || y < 0 || c >= n || r >= n) {
      tip.textContent = '';
      return;
    }
    var k = at[r * n + c];
    var text = m.hosts[r] + ' \u2194 ' + m.hosts[c] + ': ';
    if (k === undefined)
      text += 'not tested';
    else if (cells[k + 2] === 0)
      text += DS.fmtNum(cells[k + 3] / 1000 * m.median) + ' GB/s (' + DS.fmtNum(cells[k + 3] / 10) +
          ' % of the fleet median)';
    else
      text += kStatus[cells[k + 2]];
    tip.textContent = text;
  });
  return true;
}
maps.forEach(function(m) {
  try {
    if (drawOne(m)) drawn++;
  } catch (err) {
    DS.errors.push('fleet heatmap: ' + String(err));
  }
});
document.body.dataset.heatmapsDrawn = String(drawn);
})();
