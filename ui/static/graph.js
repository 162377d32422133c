// The memory graph page. Its data arrives in the URL fragment (JSON), so the page and vis-network are
// fetched once and cached; only the data changes per render. Every text is set as text (textContent,
// DOM tooltips, canvas labels): nothing from a memory is parsed as HTML.
"use strict";
// The nodes, edges and options are pyvis's (ui/graph_view.py: Network.get_network_data()); a node's label
// is its memory's event, and it also carries tm time, si session index, fl flags (1 read by the reply, 2 new,
// 4 found by a search, 8 ranked by retrieval but not given to the reply), src source turns. This page adds the marks, which labels show, and the first view.
var RETRIEVED = "#d62728";
var FOUND = "#1d4f91";
var LABEL_PX = 13;           // a node's label on screen, at every zoom (so zooming in makes room for more)
var EDGE_PX = 11;            // an arrow's relation label, on screen (readable on a phone)
var SMALL = 40;              // a graph this small is drawn whole by default
var NEIGHBOURS_MAX = 80;     // neighbours of this render's memories drawn one by one in the default view
var MUST_CHARS = 28, OTHER_CHARS = 22;  // label lengths; the whole text is in the tooltip
// The app may update the iframe in place, changing only the fragment: draw the new data then.
window.addEventListener("hashchange", function () { location.reload(); });
var data = {s: [], n: [], e: []};
try { data = JSON.parse(decodeURIComponent(location.hash.slice(1))); } catch (err) { /* empty graph */ }
// Time travel (ui/timetravel.py): data.T = {n: steps, at: first step shown, labels: [step 0..n]} and data.t[i] =
// the step (ended session) that added node i. The app then posts only a step number into this page.
var TT = data.T && Array.isArray(data.t) ? data.T : null;
var ttStep = TT ? Math.max(0, Math.min(TT.n, +TT.at || 0)) : null;
var NEW_BORDER = "#f08c00";  // amber: stands out on every session colour, dark blue to yellow

function short(text, n) { return text.length <= n ? text : text.slice(0, n - 1) + "…"; }
function el(tag, text, cls) {
  var e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

var sessions = data.s || [];
var raw = data.n || [];
var byId = {};
var neighbours = {};
var stepOf = {};
raw.forEach(function (n, i) {
  n.fl = +n.fl || 0; n.base = n.color; n.ev = String(n.label || "");
  byId[n.id] = n; neighbours[n.id] = []; stepOf[n.id] = TT ? +data.t[i] || 0 : 0;
});
if (TT) raw.forEach(function (n) { n.fl = (n.fl & 9) | (stepOf[n.id] === ttStep ? 2 : 0); });
var rawEdges = (data.e || []).filter(function (e) { return byId[e.from] && byId[e.to]; });
rawEdges.forEach(function (e) { neighbours[e.from].push(e.to); neighbours[e.to].push(e.from); });
// The memories this render is about: the found ones, else the retrieved ones, else the new ones; and their neighbours.
function flagged(bit) { return raw.filter(function (n) { return n.fl & bit; }).map(function (n) { return n.id; }); }
var marked = [4, 1, 8, 2].map(flagged).filter(function (ids) { return ids.length; })[0] || [];

// A memory named as the sidebar numbers sessions: "Session 15 · memory 46" (its id: s18:m46).
function memoryName(n) {
  var s = sessions[n.si] || ["", ""], m = /:m(\d+)$/.exec(n.id);
  return String(s[1]).split(" · ")[0] + (m ? " · memory " + m[1] : "");
}
function tooltip(n) {
  var box = el("div");
  box.appendChild(el("div", n.ev));
  // Named and dated as the sidebar names sessions and writes dates; the stored date in its title.
  box.appendChild(el("div", memoryName(n)));
  var when = el("div", n.tm);
  if (n.tr && n.tr !== n.tm) when.title = n.tr;
  box.appendChild(when);
  if (TT) box.appendChild(el("div", "added by " + ((TT.labels || [])[stepOf[n.id]] || "step " + stepOf[n.id])));
  var marks = [];
  if (n.fl & 4) marks.push("found by your search");
  if (n.fl & 1) marks.push("read by this reply");
  if (n.fl & 8) marks.push("ranked by retrieval, not given to the reply");
  if (n.fl & 2) marks.push(TT ? "added by this session" : "new");
  if (marks.length) box.appendChild(el("div", "(" + marks.join(", ") + ")"));
  if (superseded(n)) box.appendChild(el("div", "superseded by: " + byId[n.sup].ev + " (" + byId[n.sup].tm + ")"));
  box.appendChild(el("div", "click: source turns"));
  return box;
}
// The marks on pyvis's base look (colour by session date): a star for a memory the reply read, a dashed red
// ring for one retrieval ranked but the reply was not given (budget), a diamond for a new one (with an amber outline in time travel), a square outline for a search's match. A memory a later
// one replaced (a Changed edge) is kept, drawn faded; in time travel once its successor exists.
function superseded(n) { return !!(n.sup && byId[n.sup] && (!TT || stepOf[n.sup] <= ttStep)); }
function look(n) {
  var c = typeof n.base === "string" ? n.base : "#888";
  var retrieved = n.fl & 1, fresh = n.fl & 2, found = n.fl & 4, ranked = (n.fl & 8) && !retrieved;
  var border = found ? FOUND : (retrieved || ranked ? RETRIEVED : (fresh && TT ? NEW_BORDER : c));
  return {shape: retrieved ? "star" : (fresh ? "diamond" : (found ? "square" : "dot")),
          size: retrieved ? 22 : (fresh || found ? 16 : (ranked ? 12 : 10)),
          borderWidth: found || retrieved ? 4 : (fresh && TT ? 3 : (ranked ? 2 : 1)), color: {background: c, border: border},
          shapeProperties: {borderDashes: ranked && !fresh && !found ? [3, 2] : false},
          opacity: superseded(n) ? 0.3 : 1};
}
// --- which memories are shown: this reply's (the rest by session), everything, one session; a filter ----
var scope = document.getElementById("scope");
var search = document.getElementById("search");
function option(value, text) { var o = el("option", text); o.value = value; scope.appendChild(o); }
var everything = raw.length + (data.total > raw.length ? " of " + data.total : "");
if (TT) {
  option("focus", "What this session added and its links; the rest by session");
  option("all", "Everything up to this session");
} else {
  option("focus", (flagged(4).length ? "The memories found" : (marked.length ? "This reply's memories" : "The newest session")) +
         " and neighbours; the rest by session");
  option("all", "Show everything (" + everything + " memories)");
}
sessions.forEach(function (s, i) { option("s" + i, s[1]); });
var known = [].some.call(scope.options, function (o) { return o.value === data.scope; });
scope.value = known ? data.scope : (raw.length <= SMALL ? "all" : "focus");
if (data.total > raw.length) search.placeholder = "Filter the " + raw.length + " memories sent…";

// --- what is drawn --------------------------------------------------------------------------------------
// Without time travel the network holds only what the view draws. The default view ("focus"): the memories
// this render is about (found, else retrieved with their timelines, else new; with none, the newest
// session's), their direct neighbours, and every session opened by a click; each session's other memories
// are one summary node ("Session 12 · 31 memories"), so 1,000 memories draw as about a hundred nodes.
// "Everything" draws every memory. Time travel holds every memory and hides the later ones (positions stay
// put between steps).
var GROUP = "g:";            // a session's summary node: GROUP + session index
var expanded = {};           // session index -> its memories drawn one by one in the default view
var core = [], isCore = {};  // whose labels must show
function setCore(ids) {
  core = ids.slice(); isCore = {};
  core.forEach(function (id) { isCore[id] = true; });
}
setCore(marked);
if (!TT && !core.length && raw.length) {
  var newest = raw[raw.length - 1].si;
  setCore(raw.filter(function (n) { return n.si === newest; }).slice(-20).map(function (n) { return n.id; }));
}
// This render's memories, those retrieval ranked without giving them to the reply, then their neighbours
// (in time travel only those that exist at the step shown).
function focusList() {
  var out = core.slice(), seen = {}, extra = 0;
  out.forEach(function (id) { seen[id] = true; });
  flagged(8).forEach(function (id) { if (!seen[id]) { seen[id] = true; out.push(id); } });
  core.forEach(function (id) {
    neighbours[id].forEach(function (x) {
      if (!seen[x] && extra < NEIGHBOURS_MAX && exists(x)) { seen[x] = true; out.push(x); extra++; }
    });
  });
  return out;
}
function exists(id) { return !TT || stepOf[id] <= ttStep; }
var sessionColour = {};
raw.forEach(function (n) { sessionColour[n.si] = n.base; });
function plural(k) { return k + (k === 1 ? " memory" : " memories"); }
function sessionName(si) { return String((sessions[si] || ["", "Session ?"])[1]).split(" · ")[0]; }

function memoryItem(n) {
  var v = look(n);
  v.id = n.id; v.label = ""; v.title = tooltip(n);
  return v;
}
var groupText = {};
function groupItem(si, count) {
  var id = GROUP + si, tip = el("div");
  groupText[id] = sessionName(si) + " · " + plural(count);
  tip.appendChild(el("div", String((sessions[si] || ["", ""])[1])));
  tip.appendChild(el("div", plural(count) + " not drawn one by one"));
  tip.appendChild(el("div", "click: draw them"));
  return {id: id, label: "", title: tip, shape: "hexagon", physics: false, size: Math.min(28, 9 + 2.5 * Math.sqrt(count)),
          borderWidth: 1, shapeProperties: {borderDashes: [3, 2]},
          color: {background: sessionColour[si] || "#888", border: "#444"}};
}
function labelText(id) {
  if (id.indexOf(GROUP) === 0) return groupText[id] || "";
  var n = byId[id];
  return n ? short(n.ev, isCore[id] ? MUST_CHARS : OTHER_CHARS) : "";
}

// Which memories the view draws (ids) and which sessions it summarises (groups: [session index, count]).
// In time travel only what exists at the step shown; `all` (the first layout) every memory sent.
function plan(all) {
  var q = search.value.trim().toLowerCase(), v = scope.value;
  if (all) return {ids: raw.map(function (n) { return n.id; }), groups: []};
  var pick = raw.filter(function (n) {
    if (!exists(n.id)) return false;
    if (v.charAt(0) === "s" && v !== "s" + n.si) return false;
    return !q || n.ev.toLowerCase().indexOf(q) >= 0;
  }).map(function (n) { return n.id; });
  if (q || v !== "focus") return {ids: pick, groups: []};
  var drawn = {}, rest = {};
  focusList().forEach(function (id) { drawn[id] = true; });
  raw.forEach(function (n) {
    if (!exists(n.id)) return;
    if (expanded[n.si]) drawn[n.id] = true;
    else if (!drawn[n.id]) rest[n.si] = (rest[n.si] || 0) + 1;
  });
  return {ids: raw.filter(function (n) { return drawn[n.id]; }).map(function (n) { return n.id; }),
          groups: Object.keys(rest).map(Number).sort(function (a, b) { return a - b; }).map(function (si) { return [si, rest[si]]; })};
}

// An edge exists from the step of its newer end (the close that linked the new memory to an older one).
function edgeStep(e) { return Math.max(stepOf[e.from], stepOf[e.to]); }
function edgeLook(e, i, shown) {
  var v = {id: i};
  if (TT) {
    var k = edgeStep(e);
    v.hidden = k > ttStep || (shown ? !shown[e.from] || !shown[e.to] : false);
    v.width = k === ttStep ? 3.5 : 1.2;
  }
  if (e.title === "Changed") v.width = Math.max(v.width || 0, 3);  // a change stays visible beside its faded memory
  return v;
}
function edgeItems(p) {
  var on = {}, out = [];
  p.ids.forEach(function (id) { on[id] = true; });
  rawEdges.forEach(function (e, i) {
    if (!on[e.from] || !on[e.to]) return;
    var v = edgeLook(e, i);
    v.from = e.from; v.to = e.to; v.title = e.title; v.label = e.label; v.color = e.color;  // the relation, on the arrow
    out.push(v);
  });
  return out;
}
// The session summaries stand around the memories drawn, in time order clockwise from the top: outside
// the layout (no physics), so 40 sessions do not stretch the drawing of this reply's memories.
function ring() {
  if (!current.groups.length) return;
  var b = boxOf(current.ids, !!TT), m = 30 / network.getScale();  // just outside the memories and their labels
  var cx = 0, cy = 0, rx = 150, ry = 150;
  if (b) { cx = (b.left + b.right) / 2; cy = (b.top + b.bottom) / 2; rx = (b.right - b.left) / 2 + m; ry = (b.bottom - b.top) / 2 + m; }
  var n = current.groups.length;
  current.groups.forEach(function (g, k) {
    var a = -Math.PI / 2 + 2 * Math.PI * k / n;
    network.moveNode(GROUP + g[0], cx + rx * Math.cos(a), cy + ry * Math.sin(a));
  });
}

var nodes = new vis.DataSet(), edges = new vis.DataSet();
var pos = {};                // last known position of every node drawn so far
var current = plan(!!TT);  // time travel lays out every memory once: a step only hides and shows
function fill(p, fixOld) {
  var want = {}, have = {}, add = [], up = [], fresh = false;
  p.ids.forEach(function (id) { want[id] = true; });
  p.groups.forEach(function (g) { want[GROUP + g[0]] = true; });
  nodes.remove(nodes.getIds().filter(function (id) { return !want[id]; }));
  nodes.getIds().forEach(function (id) { have[id] = true; });
  p.ids.forEach(function (id, i) {
    if (have[id]) { if (fixOld) up.push({id: id, fixed: true}); return; }
    var v = memoryItem(byId[id]), at = pos[id], from = pos[GROUP + byId[id].si];
    if (!at) fresh = true;
    if (!at && from) at = {x: from.x + 30 * Math.cos(i), y: from.y + 30 * Math.sin(i)};  // opens where its summary was
    if (at) { v.x = at.x; v.y = at.y; }
    add.push(v);
  });
  p.groups.forEach(function (g) {
    var v = groupItem(g[0], g[1]), at = pos[v.id];
    if (have[v.id]) { up.push({id: v.id, title: v.title, size: v.size, fixed: !!fixOld}); return; }
    if (!at) fresh = true; else { v.x = at.x; v.y = at.y; }
    add.push(v);
  });
  if (up.length) nodes.update(up);
  if (add.length) nodes.add(add);
  edges.clear();
  edges.add(edgeItems(p));
  current = p;
  return fresh;
}
fill(current, false);
// vis-network's improved layout (Kamada-Kawai per cluster) is slow and gives up on large graphs: off above
// a few hundred memories drawn.
var BIG = 300;
var options = data.o || {};
if (current.ids.length > BIG) { options.layout = options.layout || {}; options.layout.improvedLayout = false; }
var network = new vis.Network(document.getElementById("mynetwork"), {nodes: nodes, edges: edges}, options);


// --- the view: labels that never cover each other, the first view fitted -------------------------------
var box = document.getElementById("mynetwork");
var zoomedIn = false;
var viewSeq = 0;
function fontSize() { return LABEL_PX / network.getScale(); }
function visible() {
  var show = {};
  if (TT) {
    current.ids.forEach(function (id) { show[id] = true; });
    current.groups.forEach(function (g) { show[GROUP + g[0]] = true; });
  } else nodes.getIds().forEach(function (id) { show[id] = true; });
  return show;
}
// Labels by priority: this render's memories (must show, at most 20, moved apart if need be; in "show
// everything" they only come first), then the session summaries, then the other memories, newest first.
function labelOrder(show) {
  var everything = !TT && scope.value !== "focus";
  var first = core.filter(function (id) { return show[id]; });
  var must = everything ? [] : first.slice(0, 20);
  var inMust = {};
  must.forEach(function (id) { inMust[id] = true; });
  var rest = first.filter(function (id) { return !inMust[id]; });
  current.groups.forEach(function (g) { rest.push(GROUP + g[0]); });
  for (var i = raw.length - 1; i >= 0; i--) if (show[raw[i].id] && !isCore[raw[i].id]) rest.push(raw[i].id);
  return {must: must, optional: rest};
}
function setLabels(show) {
  var order = labelOrder(show);
  // No label covers a star, diamond, square or summary (a small dot, a ranked one too, may sit under one).
  var kept = GraphLabels.place(network, nodes, box, [], order.must.concat(order.optional), labelText, fontSize(),
                               function (id) { return isCore[id] || id.indexOf(GROUP) === 0 || (byId[id] && byId[id].fl & 7); });
  // Every edge keeps its relation as its label; it is drawn on the arrows of this render's memories (and
  // on every arrow once zoomed in) where it covers no node label and no other relation: a dense graph is
  // not covered in words, and the tooltip of an arrow names its relation.
  var wanted = [], off = [];
  edges.get().forEach(function (e) {
    if (!e.label) return;
    var on = show[e.from] && show[e.to] && (isCore[e.from] || isCore[e.to] || zoomedIn);
    if (on) wanted.push(e.id); else off.push({id: e.id, font: {size: 0}});
  });
  if (off.length) edges.update(off);
  GraphLabels.placeEdges(network, edges, box, wanted, kept, EDGE_PX / network.getScale());
}
// The box around the given nodes with their labels, in canvas units (vis-network measures labels when
// it draws: draw first).
// `quick` (time travel, where a step must draw fast): the nodes' places alone, without drawing first.
function boxOf(ids, quick) {
  if (quick) {
    var p = network.getPositions(ids), q = null;
    ids.forEach(function (id) {
      var at = p[id];
      if (!at) return;
      q = q ? {left: Math.min(q.left, at.x), right: Math.max(q.right, at.x), top: Math.min(q.top, at.y),
               bottom: Math.max(q.bottom, at.y)} : {left: at.x, right: at.x, top: at.y, bottom: at.y};
    });
    return q;
  }
  network.redraw();
  var b = null;
  ids.forEach(function (id) {
    var r = network.getBoundingBox(id);
    if (!r) return;
    b = b ? {left: Math.min(b.left, r.left), right: Math.max(b.right, r.right), top: Math.min(b.top, r.top),
             bottom: Math.max(b.bottom, r.bottom)} : r;
  });
  return b;
}
function fitBox(ids, quick) {
  var b = boxOf(ids, quick);
  if (!b) return network.getScale();
  // Quick: room around the nodes' centres for a marker and a label beneath it (labels are 13 px on screen).
  var padX = quick ? 24 + 90 : 24, padY = quick ? 24 + 22 : 24;
  var w = Math.max(box.clientWidth - 2 * padX, 50), h = Math.max(box.clientHeight - 2 * padY, 50);
  var s = Math.min(w / Math.max(b.right - b.left, 1), h / Math.max(b.bottom - b.top, 1), 1.3);
  network.moveTo({position: {x: (b.left + b.right) / 2, y: (b.top + b.bottom) / 2}, scale: s, animation: false});
  return s;
}
// First view. The default view fits the memories drawn one by one (not the summaries); when that is too
// far out, this render's memories with their neighbours, then those alone. Their labels are drawn and
// moved apart, and the view refitted around them, until it settles. "Show everything" and one session
// fit what they draw; time travel fits the step's memories and their links, as the default view does.
var MIN_SCALE = 0.35;
function firstView(show) {
  var ids = Object.keys(show), must = labelOrder(show).must;
  var memories = ids.filter(function (id) { return id.indexOf(GROUP) !== 0; });
  var groups = current.groups.map(function (g) { return GROUP + g[0]; });
  var near = must.slice();
  must.forEach(function (id) { neighbours[id].forEach(function (x) { if (show[x] && near.indexOf(x) < 0) near.push(x); }); });
  var target = TT && ids.length > SMALL && must.length ? near : memories;
  if (TT) {  // one round: fitted by the nodes' places, then the labels that fit (a step stays under 100 ms)
    if (target.length) { ring(); fitBox(box.clientWidth < 500 ? target : target.concat(groups), true); }
    setLabels(show);
    return;
  }
  if (!target.length) return;
  GraphLabels.place(network, nodes, box, [], [], labelText, fontSize());
  if (fitBox(target) < MIN_SCALE && must.length && target.length > near.length) target = near;
  // Fitted with this render's labels inside (a label's size on the canvas follows the scale: a few rounds).
  for (var k = 0; k < 3; k++) {
    GraphLabels.place(network, nodes, box, must, [], labelText, fontSize());
    ring();
    fitBox(box.clientWidth < 500 ? target : target.concat(groups));  // a phone: the summaries at the edge
  }
  setLabels(show);
}
function countText(n) {
  var g = current.groups.reduce(function (a, x) { return a + x[1]; }, 0);
  var t = n + " shown";
  if (g) t += " · " + g + " more in " + current.groups.length + " sessions (click one to draw it)";
  document.getElementById("count").textContent = t;
  document.getElementById("fold").hidden = !Object.keys(expanded).length;
}
function finish(refit) {
  var p = network.getPositions();
  Object.keys(p).forEach(function (id) { pos[id] = p[id]; });
  var show = visible();
  if (refit) firstView(show); else setLabels(show);
  var n = Object.keys(show).filter(function (id) { return id.indexOf(GROUP) !== 0; }).length;
  if (!TT) countText(n); else document.getElementById("fold").hidden = !Object.keys(expanded).length;
  viewSeq++;
  window.viewShown = {seq: viewSeq, memories: n, groups: current.groups.length, scope: scope.value};
  return n;
}
// A new plan: nodes without a known place are laid out (physics, a few hundred steps) with the others
// held where they are, then the view is fitted again.
var laying = false, again = false;
function redo(refit, hold) {
  if (!ready) return;
  if (laying) { again = true; return; }
  var next = plan();
  if (next.ids.length > BIG) network.setOptions({layout: {improvedLayout: false}});
  if (!fill(next, hold)) { finish(refit); return; }
  laying = true;
  network.setOptions({physics: {enabled: true, stabilization: {fit: false}}});
  network.once("stabilizationIterationsDone", function () {
    network.setOptions({physics: false});
    if (hold) nodes.update(nodes.getIds().map(function (id) { return {id: id, fixed: false}; }));
    laying = false;
    finish(refit);
    if (again) { again = false; redo(true, false); }
  });
  network.stabilize(hold ? 150 : 200);
}
// Time travel: the network holds every memory (laid out once) and a summary per session; a step shows the
// plan's part and hides the rest, changing only the nodes and edges whose look changed (fast at 1,000).
var lastLook = {}, lastEdge = {};
function changed(cache, v) {
  var key = JSON.stringify(v);
  if (cache[v.id] === key) return false;
  cache[v.id] = key;
  return true;
}
function apply(refit) {
  if (!TT) { redo(refit, false); return current.ids.length; }
  current = plan(false);
  var show = {}, groups = {}, up = [], eup = [];
  current.ids.forEach(function (id) { show[id] = true; });
  current.groups.forEach(function (g) { groups[g[0]] = g[1]; });
  raw.forEach(function (n) {
    var v = look(n); v.id = n.id; v.hidden = !show[n.id];
    if (changed(lastLook, v)) { v.title = tooltip(n); up.push(v); }
  });
  sessions.forEach(function (s, si) {
    var id = GROUP + si, v = groups[si] ? groupItem(si, groups[si]) : {id: id, hidden: true};
    if (groups[si]) { v.hidden = false; delete v.title; }
    if (changed(lastLook, v)) { if (groups[si]) v.title = groupItem(si, groups[si]).title; up.push(v); }
  });
  if (up.length) nodes.update(up);
  rawEdges.forEach(function (e, i) { var v = edgeLook(e, i, show); if (changed(lastEdge, v)) eup.push(v); });
  if (eup.length) edges.update(eup);
  ring();
  return finish(refit);
}
var zoomTimer = null;
function relabel() {
  clearTimeout(zoomTimer);
  zoomTimer = setTimeout(function () {
    zoomedIn = network.getScale() * LABEL_PX >= 16;  // zoomed in: every arrow gets its relation
    if (!laying) setLabels(visible());
  }, 120);
}
network.on("zoom", relabel);
network.on("dragEnd", relabel);
// A frame laid out while its box had no size (a closed panel, a hidden tab, a page still loading) was fitted to
// nothing and showed only its legend: each time the box gets a new size the view is fitted again, unless the
// person has moved it since.
var moved = false, lastSize = box.clientWidth + "x" + box.clientHeight;
network.on("dragStart", function () { moved = true; });
network.on("zoom", function () { moved = true; });
if (window.ResizeObserver) new ResizeObserver(function () {
  var size = box.clientWidth + "x" + box.clientHeight;
  if (size === lastSize || !box.clientWidth || !box.clientHeight) return;
  var wasEmpty = /^0x|x0$/.test(lastSize);
  lastSize = size;
  if (!ready || laying || (moved && !wasEmpty)) return;
  network.setSize("100%", "100%");
  network.redraw();
  finish(true);
}).observe(box);
var searchTimer = null;
search.addEventListener("input", function () { clearTimeout(searchTimer); searchTimer = setTimeout(function () { apply(true); }, 200); });
scope.addEventListener("change", function () { apply(true); });
document.getElementById("fold").addEventListener("click", function () { expanded = {}; if (TT) apply(true); else redo(true, false); });
var ready = false, pending = null;
if (TT) document.getElementById("count").textContent = "drawing " + raw.length + " memories…";
network.once("stabilizationIterationsDone", function () {
  network.setOptions({physics: false});
  ready = true;
  if (TT) nodes.add(sessions.map(function (s, si) { var v = groupItem(si, 0); v.hidden = true; return v; }));
  if (TT) showStep(pending === null ? ttStep : pending); else finish(true);
  if (data.open && byId[data.open]) openPanel(data.open);
  window.graphReady = true;
  if (TT && window.parent !== window) window.parent.postMessage({ttReady: true}, "*");
});
window.labelOverlaps = function () { return GraphLabels.overlaps(network, box); };
window.edgeLabelOverlaps = function () { return GraphLabels.edgeOverlaps(network, box); };


// The legend's part that time travel changes: the faded (superseded) memories and the relations that
// exist at the step shown; without time travel, those of the whole graph.
function legendNow() {
  var box = document.getElementById("legend-now");
  if (!box) return;
  box.textContent = "";
  var faded = raw.filter(function (n) { return (!TT || stepOf[n.id] <= ttStep) && superseded(n); }).length;
  if (faded) { var f = el("span", "faded: superseded (" + faded + ")"); f.title = "Memories a later one replaced (Changed): kept as history"; box.appendChild(f); }
  var present = {}, on = visible();
  rawEdges.forEach(function (e) { if (!TT || (edgeStep(e) <= ttStep && on[e.from] && on[e.to])) present[e.title] = e.color; });
  Object.keys(present).sort().forEach(function (r) {
    var s = el("span", r, "rel"); s.style.borderColor = present[r]; box.appendChild(s);
  });
}

// --- time travel: the app posts {ttStep: k}; memories added after session k are hidden, session k's marked -----
function showStep(k) {
  ttStep = k;
  raw.forEach(function (n) { n.fl = (n.fl & 9) | (stepOf[n.id] === k ? 2 : 0); });
  marked = flagged(2);
  setCore(marked);
  expanded = {};
  var shown = apply(true);
  var label = (TT.labels || [])[k] || ("step " + k), upTo = raw.filter(function (n) { return exists(n.id); }).length;
  var text = shown + " memories " + (k ? "after " + label : "(" + label + ")");
  if (upTo > shown) text += " · " + (upTo - shown) + " more in " + current.groups.length + " sessions (click one to draw it)";
  document.getElementById("count").textContent = text;
  scope.options[1].textContent = "Everything up to this session (" + plural(upTo) + ")";
  var mark = document.getElementById("legend-new");
  if (mark) mark.textContent = "◆ added by this session (" + marked.length + ")";
  legendNow();
  window.ttShown = {step: k, memories: shown, added: marked.length, upTo: upTo, groups: current.groups.length, at: Date.now()};
}
if (TT) window.addEventListener("message", function (e) {
  if (e.source !== window.parent || !e.data || typeof e.data !== "object") return;
  var k = Number(e.data.ttStep);
  if (!Number.isInteger(k) || k < 0 || k > TT.n) return;
  if (ready) showStep(k); else pending = k;
});

// --- click: the memory's source turns ------------------------------------------------------------
var panel = document.getElementById("panel");
function openPanel(id) {
  var n = byId[id];
  panel.textContent = "";
  var close = el("button", "×"); close.setAttribute("aria-label", "Close");
  close.onclick = function () { panel.hidden = true; };
  panel.appendChild(close);
  panel.appendChild(el("h3", n.ev));
  panel.appendChild(el("div", memoryName(n) + " · " + n.tm));
  var turns = n.src || [];
  panel.appendChild(el("h3", turns.length ? "Source turns" : "No source turns recorded"));
  turns.forEach(function (t) {
    var d = el("div", undefined, "turn");
    d.appendChild(el("span", t[0] + ": ", "who"));
    d.appendChild(el("span", t[1]));
    panel.appendChild(d);
  });
  panel.hidden = false;
  panel.dataset.id = id;
  network.selectNodes([id]);
}
// A click on a session's summary draws its memories one by one (the rest stays where it is).
network.on("click", function (p) {
  if (!p.nodes.length) { panel.hidden = true; return; }
  var id = String(p.nodes[0]);
  if (id.indexOf(GROUP) === 0) {
    expanded[+id.slice(GROUP.length)] = true;
    if (TT) apply(false); else redo(false, true);
    return;
  }
  openPanel(id);
});

// --- legend: one colour scale, the marks, the relations present ----------------------------------
(function legend() {
  var lg = document.getElementById("legend");
  if (sessions.length) {
    var sc = el("span", undefined, "scale");
    sc.appendChild(el("span", sessions[0][1].split(" · ").slice(-1)[0]));
    var ramp = el("span", undefined, "ramp");
    ramp.style.background = "linear-gradient(90deg," + (data.ramp || ["#888", "#888"]).join(",") + ")";
    sc.appendChild(ramp);
    sc.appendChild(el("span", sessions[sessions.length - 1][1].split(" · ").slice(-1)[0]));
    sc.title = sessions.length + " sessions, coloured by date";
    lg.appendChild(sc);
  }
  var nFound = flagged(4).length;
  if (nFound) lg.appendChild(el("span", "■ found (" + nFound + ")"));
  if (!TT) {
    var read = el("span", "★ read by the reply (" + flagged(1).length + ")");
    read.title = "The memories of the timelines given to the reply (its prompt)";
    lg.appendChild(read);
    var nRanked = raw.filter(function (n) { return (n.fl & 8) && !(n.fl & 1); }).length;
    if (nRanked) {
      var ranked = el("span", "◌ ranked, not read (" + nRanked + ")");
      ranked.title = "Retrieval ranked these, but the token budget left them out of the reply's prompt";
      lg.appendChild(ranked);
    }
  }
  var fresh = el("span", (TT ? "◆ added by this session (" : "◆ new (") + flagged(2).length + ")");
  fresh.id = "legend-new";
  if (TT) { fresh.title = "Diamonds with an amber outline and thick edges: what this session added and linked"; fresh.style.borderBottom = "3px solid " + NEW_BORDER; }
  lg.appendChild(fresh);
  if (!TT && current.groups.length) {
    var g = el("span", "⬢ a session's other memories");
    g.title = "Click one to draw its memories; the box above shows every memory";
    lg.appendChild(g);
  }
  var now = el("span"); now.id = "legend-now"; lg.appendChild(now);
  legendNow();
  // A legend that wraps on a narrow frame pushes the graph down instead of covering it.
  // (again whenever the legend or the bar above it changes height: fonts arriving, the count written, the
  // relations of a time-travel step).
  var wrap = document.getElementById("wrap");
  function place() { wrap.style.top = Math.max(58, lg.offsetTop + lg.offsetHeight) + "px"; }
  place();
  if (window.ResizeObserver) {  // the bar above it wraps too once its count is written
    var ro = new ResizeObserver(place);
    ro.observe(lg);
    ro.observe(document.getElementById("bar"));
  }
})();

// For tests: each marked memory's label, its on-screen font size, whether its node and its label's box
// are inside the frame at the current view.
window.labelCheck = function (bit) {
  var scale = network.getScale();
  return raw.filter(function (n) { return n.fl & (bit || 1); }).map(function (n) {
    var v = nodes.get(n.id);
    if (!v) return {id: n.id, label: "", hidden: true, drawn: false, px: 0, inView: false, labelIn: false};
    var p = network.canvasToDOM(network.getPositions([n.id])[n.id]);
    var b = network.getBoundingBox(n.id), tl = network.canvasToDOM({x: b.left, y: b.top}), br = network.canvasToDOM({x: b.right, y: b.bottom});
    return {id: n.id, label: v.label, hidden: !!v.hidden, px: scale * ((v.font && v.font.size) || LABEL_PX),
            inView: p.x >= 0 && p.y >= 0 && p.x <= box.clientWidth && p.y <= box.clientHeight,
            labelIn: tl.x >= 0 && tl.y >= 0 && br.x <= box.clientWidth && br.y <= box.clientHeight};
  });
};
