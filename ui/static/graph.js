// The memory graph page. Its data arrives in the URL fragment (JSON), so the page and vis-network are
// fetched once and cached; only the data changes per render. Every text is set as text (textContent,
// DOM tooltips, canvas labels): nothing from a memory is parsed as HTML.
"use strict";
// The nodes, edges and options are pyvis's (ui/graph_view.py: Network.get_network_data()); a node's label
// is its memory's event, and it also carries tm time, si session index, fl flags (1 retrieved, 2 new,
// 4 found by a search), src source turns. This page adds the marks, which labels show, and the first view.
var RETRIEVED = "#d62728";
var FOUND = "#1d4f91";
var LABEL_PX = 13;           // font size of the labels at scale 1
var READABLE_PX = 12;        // a shown label is never smaller than this on screen
var EDGE_PX = 10;            // an arrow's relation label, on screen
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
if (TT) raw.forEach(function (n) { n.fl = (n.fl & 1) | (stepOf[n.id] === ttStep ? 2 : 0); });
var rawEdges = (data.e || []).filter(function (e) { return byId[e.from] && byId[e.to]; });
rawEdges.forEach(function (e) { neighbours[e.from].push(e.to); neighbours[e.to].push(e.from); });
// The memories this render is about: the found ones, else the retrieved ones, else the new ones; and their neighbours.
function flagged(bit) { return raw.filter(function (n) { return n.fl & bit; }).map(function (n) { return n.id; }); }
var marked = flagged(4).length ? flagged(4) : (flagged(1).length ? flagged(1) : flagged(2));
var focus = {};
marked.forEach(function (id) { focus[id] = true; neighbours[id].forEach(function (x) { focus[x] = true; }); });

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
  if (n.fl & 1) marks.push("retrieved for this reply");
  if (n.fl & 2) marks.push(TT ? "added by this session" : "new");
  if (marks.length) box.appendChild(el("div", "(" + marks.join(", ") + ")"));
  if (superseded(n)) box.appendChild(el("div", "superseded by: " + byId[n.sup].ev + " (" + byId[n.sup].tm + ")"));
  box.appendChild(el("div", "click: source turns"));
  return box;
}
// The marks on pyvis's base look (colour by session date): a star for a retrieved memory, a diamond for a
// new one (with an amber outline in time travel), a square outline for a search's match. A memory a later
// one replaced (a Changed edge) is kept, drawn faded; in time travel once its successor exists.
function superseded(n) { return !!(n.sup && byId[n.sup] && (!TT || stepOf[n.sup] <= ttStep)); }
function look(n) {
  var c = typeof n.base === "string" ? n.base : "#888";
  var retrieved = n.fl & 1, fresh = n.fl & 2, found = n.fl & 4;
  var border = found ? FOUND : (retrieved ? RETRIEVED : (fresh && TT ? NEW_BORDER : c));
  return {shape: retrieved ? "star" : (fresh ? "diamond" : (found ? "square" : "dot")),
          size: retrieved ? 22 : (fresh || found ? 16 : 10),
          borderWidth: found || retrieved ? 4 : (fresh && TT ? 3 : 1), color: {background: c, border: border},
          opacity: superseded(n) ? 0.3 : 1};
}
var nodes = new vis.DataSet(raw.map(function (n) {
  var v = look(n);
  v.id = n.id; v.label = ""; v.title = tooltip(n);
  return v;
}));
// An edge exists from the step of its newer end (the close that linked the new memory to an older one).
function edgeStep(e) { return Math.max(stepOf[e.from], stepOf[e.to]); }
function edgeLook(e, i) {
  var v = {id: i};
  if (TT) { var k = edgeStep(e); v.hidden = k > ttStep; v.width = k === ttStep ? 3.5 : 1.2; }
  if (e.title === "Changed") v.width = Math.max(v.width || 0, 3);  // a change stays visible beside its faded memory
  return v;
}
var edges = new vis.DataSet(rawEdges.map(function (e, i) {
  var v = edgeLook(e, i);
  v.from = e.from; v.to = e.to; v.title = e.title; v.label = e.label; v.color = e.color;  // the relation, on the arrow
  return v;
}));
var network = new vis.Network(document.getElementById("mynetwork"), {nodes: nodes, edges: edges}, data.o || {});

// --- which memories are shown: everything, this reply's neighbourhood, one session; and a filter ------
var scope = document.getElementById("scope");
var search = document.getElementById("search");
function option(value, text) { var o = el("option", text); o.value = value; scope.appendChild(o); }
option("all", "Everything drawn (" + raw.length + (data.total > raw.length ? " of " + data.total : "") + ")");
if (TT) option("focus", "What this session added, with its links");
else if (flagged(4).length) option("focus", "The memories found, with their neighbours");
else if (marked.length) option("focus", "This reply's memories and neighbours");
sessions.forEach(function (s, i) { option("s" + i, s[1]); });
if (data.scope && [].some.call(scope.options, function (o) { return o.value === data.scope; })) scope.value = data.scope;
if (data.total > raw.length) search.placeholder = "Filter the drawn…";

function visibleIds() {
  var q = search.value.trim().toLowerCase(), v = scope.value, out = [];
  raw.forEach(function (n) {
    var inScope = v === "all" || (v === "focus" && focus[n.id]) || v === "s" + n.si;
    var exists = !TT || stepOf[n.id] <= ttStep;
    if (exists && inScope && (!q || n.ev.toLowerCase().indexOf(q) >= 0)) out.push(n.id);
  });
  return out;
}

// --- the view: every label inside the frame and readable ----------------------------------------------
var box = document.getElementById("mynetwork");
var labelled = {};          // the memories whose label is drawn
var zoomedIn = false;
function fontPx() { return Math.max(LABEL_PX, READABLE_PX / network.getScale()); }
function setLabels(show) {
  var size = fontPx(), up = [];
  raw.forEach(function (n) {
    var on = !!(show[n.id] && (labelled[n.id] || zoomedIn));
    up.push({id: n.id, label: on ? short(n.ev, 48) : "", font: {size: on ? size : LABEL_PX}});
  });
  nodes.update(up);
  // Every edge keeps its relation as its label; it is drawn (size > 0) on the arrows of this render's
  // memories (retrieved, found or new) and between two labelled memories, everywhere once zoomed in: a
  // dense graph is not covered in words.
  var edgeSize = EDGE_PX / network.getScale(), core = {};
  marked.forEach(function (id) { core[id] = true; });
  edges.update(rawEdges.map(function (e, i) {
    var near = core[e.from] || core[e.to] || (labelled[e.from] && labelled[e.to]);
    var on = show[e.from] && show[e.to] && (near || zoomedIn);
    return {id: i, font: {size: on ? edgeSize : 0}};
  }));
}
// The box around the given memories with their labels, in canvas units (vis-network measures labels when
// it draws: draw first).
function boxOf(ids) {
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
function fitBox(ids) {
  var b = boxOf(ids);
  if (!b) return network.getScale();
  var pad = 24, w = Math.max(box.clientWidth - 2 * pad, 50), h = Math.max(box.clientHeight - 2 * pad, 50);
  var s = Math.min(w / Math.max(b.right - b.left, 1), h / Math.max(b.bottom - b.top, 1), 1.3);
  network.moveTo({position: {x: (b.left + b.right) / 2, y: (b.top + b.bottom) / 2}, scale: s, animation: false});
  return s;
}
// First view: the labelled memories when they fit with readable labels; else the core (found, retrieved
// or new) with its neighbours around it, only the core labelled, labels enlarged to stay readable; the
// core alone when even that is too far out. Refitted after the labels grow, so they stay inside.
var MIN_SCALE = 0.35;
function fitTo(ids, core, show) {
  if (!ids.length) return;
  labelled = {};
  ids.forEach(function (id) { labelled[id] = true; });
  setLabels(show);
  var s = fitBox(ids);
  if (s * LABEL_PX >= READABLE_PX) return;
  var c = (core || []).filter(function (id) { return show[id]; });
  if (!c.length) c = ids.slice(-20);  // nothing marked: the newest memories
  var around = c.slice();
  c.forEach(function (id) { (neighbours[id] || []).forEach(function (x) { if (show[x] && around.indexOf(x) < 0) around.push(x); }); });
  labelled = {};
  c.forEach(function (id) { labelled[id] = true; });
  var frame = around;
  for (var i = 0; i < 3; i++) {
    setLabels(show);
    if (fitBox(frame) < MIN_SCALE && frame !== c) { frame = c; i = -1; }
  }
  setLabels(show);
}
var shownNow = {};
function apply(refit) {
  var show = {}, q = search.value.trim();
  visibleIds().forEach(function (id) { show[id] = true; });
  shownNow = show;
  var ids = Object.keys(show);
  var candidates = ids.length <= 40 || q ? ids : ids.filter(function (id) { return focus[id]; });
  nodes.update(raw.map(function (n) {
    var v = TT ? look(n) : {};
    v.id = n.id; v.hidden = !show[n.id];
    return v;
  }));
  document.getElementById("count").textContent = ids.length + " shown";
  if (refit) fitTo(candidates.length ? candidates : ids, q ? candidates : marked, show);
  else setLabels(show);
  return ids.length;
}
var lastFont = 0;
network.on("zoom", function () {
  var z = network.getScale() * LABEL_PX >= 16;      // zoomed in: every visible memory gets its label
  var f = fontPx();
  if (z !== zoomedIn || Math.abs(f - lastFont) / lastFont > 0.1) { zoomedIn = z; lastFont = f; setLabels(shownNow); }
});
search.addEventListener("input", function () { apply(true); });
scope.addEventListener("change", function () { apply(true); });
var ready = false, pending = null;
if (TT) document.getElementById("count").textContent = "drawing " + raw.length + " memories…";
network.once("stabilizationIterationsDone", function () {
  network.setOptions({physics: false});
  ready = true;
  if (TT) { showStep(pending === null ? ttStep : pending); } else apply(true);
  lastFont = fontPx();
  if (data.open && byId[data.open]) openPanel(data.open);
  window.graphReady = true;
  if (TT && window.parent !== window) window.parent.postMessage({ttReady: true}, "*");
});

// The legend's part that time travel changes: the faded (superseded) memories and the relations that
// exist at the step shown; without time travel, those of the whole graph.
function legendNow() {
  var box = document.getElementById("legend-now");
  if (!box) return;
  box.textContent = "";
  var faded = raw.filter(function (n) { return (!TT || stepOf[n.id] <= ttStep) && superseded(n); }).length;
  if (faded) { var f = el("span", "faded: superseded (" + faded + ")"); f.title = "Memories a later one replaced (Changed): kept as history"; box.appendChild(f); }
  var present = {};
  rawEdges.forEach(function (e) { if (!TT || edgeStep(e) <= ttStep) present[e.title] = e.color; });
  Object.keys(present).sort().forEach(function (r) {
    var s = el("span", r, "rel"); s.style.borderColor = present[r]; box.appendChild(s);
  });
}

// --- time travel: the app posts {ttStep: k}; memories added after session k are hidden, session k's marked -----
function showStep(k) {
  ttStep = k;
  raw.forEach(function (n) { n.fl = (n.fl & 1) | (stepOf[n.id] === k ? 2 : 0); });
  marked = flagged(2);
  focus = {};
  marked.forEach(function (id) { focus[id] = true; neighbours[id].forEach(function (x) { if (stepOf[x] <= k) focus[x] = true; }); });
  edges.update(rawEdges.map(edgeLook));
  var shown = apply(true);
  var label = (TT.labels || [])[k] || ("step " + k);
  document.getElementById("count").textContent = shown + " memories " + (k ? "after " + label : "(" + label + ")");
  var mark = document.getElementById("legend-new");
  if (mark) mark.textContent = "◆ added by this session (" + marked.length + ")";
  legendNow();
  network.redraw();
  window.ttShown = {step: k, memories: shown, added: marked.length, at: Date.now()};
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
network.on("click", function (p) {
  if (!p.nodes.length) { panel.hidden = true; return; }
  openPanel(p.nodes[0]);
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
  if (!TT) lg.appendChild(el("span", "★ retrieved (" + flagged(1).length + ")"));
  var fresh = el("span", (TT ? "◆ added by this session (" : "◆ new (") + flagged(2).length + ")");
  fresh.id = "legend-new";
  if (TT) { fresh.title = "Diamonds with an amber outline and thick edges: what this session added and linked"; fresh.style.borderBottom = "3px solid " + NEW_BORDER; }
  lg.appendChild(fresh);
  var now = el("span"); now.id = "legend-now"; lg.appendChild(now);
  legendNow();
  // A legend that wraps on a narrow frame pushes the graph down instead of covering it.
  var wrap = document.getElementById("wrap");
  wrap.style.top = Math.max(58, lg.offsetTop + lg.offsetHeight) + "px";
})();

// For tests: each marked memory's label, its on-screen font size, whether its node and its label's box
// are inside the frame at the current view.
window.labelCheck = function (bit) {
  var scale = network.getScale();
  return raw.filter(function (n) { return n.fl & (bit || 1); }).map(function (n) {
    var v = nodes.get(n.id);
    var p = network.canvasToDOM(network.getPositions([n.id])[n.id]);
    var b = network.getBoundingBox(n.id), tl = network.canvasToDOM({x: b.left, y: b.top}), br = network.canvasToDOM({x: b.right, y: b.bottom});
    return {id: n.id, label: v.label, hidden: !!v.hidden, px: scale * ((v.font && v.font.size) || LABEL_PX),
            inView: p.x >= 0 && p.y >= 0 && p.x <= box.clientWidth && p.y <= box.clientHeight,
            labelIn: tl.x >= 0 && tl.y >= 0 && br.x <= box.clientWidth && br.y <= box.clientHeight};
  });
};
