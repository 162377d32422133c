// Which node labels the memory graph draws, so that no two drawn labels cover each other.
// Labels are drawn in order of priority (the memories this render is about first), each only where it
// covers no label drawn before it and no other node's marker; the rest show on hover (the tooltip) or
// once zoomed in far enough to fit. Boxes are vis-network's own measure of each label as
// drawn (node.labelModule.size, canvas units), so what is checked is what is on the screen.
"use strict";
var GraphLabels = (function () {
  var PAD = 4;  // px kept free between two labels on screen
  var labelled = {};  // ids whose label is set: a hidden node without one is left alone (time travel holds 1,000)

  function labelBox(network, id) {
    var node = network.body.nodes[id];
    var s = node && node.labelModule && node.labelModule.size;
    if (!s || !s.width || !node.options.label) return null;
    return {l: s.left, t: s.top, r: s.left + s.width, b: s.top + s.height};
  }
  function markerBox(network, id) {
    var node = network.body.nodes[id];
    if (!node) return null;
    var r = (node.options.size || 10) + (node.options.borderWidth || 1);
    return {l: node.x - r, t: node.y - r, r: node.x + r, b: node.y + r};
  }
  function hit(a, b, pad) { return a.l < b.r + pad && b.l < a.r + pad && a.t < b.b + pad && b.t < a.b + pad; }
  function inView(network, box, frame, whole) {
    var a = network.canvasToDOM({x: box.l, y: box.t}), b = network.canvasToDOM({x: box.r, y: box.b});
    if (whole) return a.x >= 0 && a.y >= 0 && b.x <= frame.clientWidth && b.y <= frame.clientHeight;
    return b.x > 0 && b.y > 0 && a.x < frame.clientWidth && a.y < frame.clientHeight;
  }

  // Pairs of drawn, visible, on-screen node labels whose boxes intersect (what the benchmark reports).
  function overlaps(network, frame) {
    var boxes = [];
    Object.keys(network.body.nodes).forEach(function (id) {
      var node = network.body.nodes[id];
      if (node.options.hidden || id.indexOf("edgeId:") === 0) return;
      var b = labelBox(network, id);
      if (b && inView(network, b, frame)) boxes.push(b);
    });
    var n = 0;
    for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) if (hit(boxes[i], boxes[j], 0)) n++;
    return n;
  }

  // Draw `must` labels, then each of `optional` (in order of priority) where it is clear of every label
  // drawn so far and of every marker but its own (only those `isMarker(id)` accepts, when given).
  // `text(id)` gives a label; returns the boxes of the labels drawn.
  function place(network, nodes, frame, must, optional, text, fontSize, isMarker) {
    var font = {size: fontSize}, up = [], want = {};
    must.concat(optional).forEach(function (id) { want[id] = true; });
    nodes.getIds().forEach(function (id) {
      var node = network.body.nodes[id];
      if (!want[id] && !labelled[id] && node && node.options.hidden) return;
      up.push({id: id, label: want[id] ? text(id) : "", font: font});
      if (want[id]) labelled[id] = true; else delete labelled[id];
    });
    nodes.update(up);
    network.redraw();  // vis-network measures a label when it draws it
    var kept = [], markers = [], off = [];
    must.forEach(function (id) { var b = labelBox(network, id); if (b) kept.push(b); });
    nodes.getIds().forEach(function (id) {
      var node = network.body.nodes[id];
      if (node && !node.options.hidden && (!isMarker || isMarker(id))) markers.push({id: id, b: markerBox(network, id)});
    });
    var pad = PAD / network.getScale();
    optional.forEach(function (id) {
      var b = labelBox(network, id);
      var clear = b && inView(network, b, frame, true) &&  // a label is drawn whole or not at all
        !kept.some(function (k) { return hit(b, k, pad); }) &&
        !markers.some(function (m) { return m.id !== id && hit(b, m.b, 0); });
      if (clear) kept.push(b); else { off.push({id: id, label: ""}); delete labelled[id]; }
    });
    if (off.length) nodes.update(off);
    return kept;
  }

  // The relation labels of `ids` (edges), each drawn only where it covers nothing: no node label drawn
  // (`kept`), no node drawn (not even a small dot) and no relation label drawn before it, whole inside the
  // frame; `size` is the font size for the drawn ones.
  function placeEdges(network, edges, frame, ids, kept, size) {
    edges.update(ids.map(function (id) { return {id: id, font: {size: size}}; }));
    network.redraw();
    var pad = PAD / network.getScale(), taken = kept.slice(), off = [];
    Object.keys(network.body.nodes).forEach(function (id) {
      var node = network.body.nodes[id];
      if (!node.options.hidden && id.indexOf("edgeId:") !== 0) taken.push(markerBox(network, id));
    });
    ids.forEach(function (id) {
      var e = network.body.edges[id], s = e && e.labelModule && e.labelModule.size;
      var b = s && s.width ? {l: s.left, t: s.top, r: s.left + s.width, b: s.top + s.height} : null;
      if (b && inView(network, b, frame, true) && !taken.some(function (k) { return hit(b, k, pad); })) taken.push(b);
      else off.push({id: id, font: {size: 0}});
    });
    if (off.length) edges.update(off);
  }

  // Drawn relation labels (font size above 0 on a shown edge) that cover a node label, a node or another
  // relation label: what the browser test counts (0 when placeEdges kept its rule).
  function edgeOverlaps(network, frame) {
    var labels = [], things = [];
    Object.keys(network.body.nodes).forEach(function (id) {
      var node = network.body.nodes[id];
      if (node.options.hidden || id.indexOf("edgeId:") === 0) return;
      things.push(markerBox(network, id));
      var b = labelBox(network, id);
      if (b) things.push(b);
    });
    Object.keys(network.body.edges).forEach(function (id) {
      var e = network.body.edges[id], s = e.labelModule && e.labelModule.size;
      if (!e.options.label || e.options.hidden || !(e.options.font && e.options.font.size > 0) || !s || !s.width) return;
      if (e.from && e.from.options.hidden || e.to && e.to.options.hidden) return;
      var b = {l: s.left, t: s.top, r: s.left + s.width, b: s.top + s.height};
      if (inView(network, b, frame)) labels.push(b);
    });
    var n = 0;
    labels.forEach(function (b, i) {
      things.forEach(function (t) { if (hit(b, t, 0)) n++; });
      for (var j = i + 1; j < labels.length; j++) if (hit(b, labels[j], 0)) n++;
    });
    return {drawn: labels.length, overlaps: n};
  }

  return {place: place, placeEdges: placeEdges, overlaps: overlaps, edgeOverlaps: edgeOverlaps, labelBox: labelBox};
})();
