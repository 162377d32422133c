// The memory graph page. Its data arrives in the URL fragment (JSON), so the page and vis-network are
// fetched once and cached; only the data changes per render. Every text is set as text (textContent,
// DOM tooltips, canvas labels): nothing from a memory is parsed as HTML.
"use strict";
var RELATIONS = {Changed: "#e15759", Cause: "#f28e2b", Reason: "#edc948", HinderedBy: "#b07aa1",
                 React: "#59a14f", Want: "#4e79a7", SameTopic: "#9d9d9d"};
var RETRIEVED = "#d62728";
// One sequential scale (older = dark blue, newer = yellow): a session's colour is fixed by its date.
var STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
var LABEL_PX = 13;           // font size of the labels shown at the default zoom
// The app may update the iframe in place, changing only the fragment: draw the new data then.
window.addEventListener("hashchange", function () { location.reload(); });
var data = {s: [], n: [], e: []};
try { data = JSON.parse(decodeURIComponent(location.hash.slice(1))); } catch (err) { /* empty graph */ }
// Time travel (ui/timetravel.py): data.T = {n: steps, at: first step shown, labels: [step 0..n]} and data.t[i] =
// the step (ended session) that added node i. The app then posts only a step number into this page.
var TT = data.T && Array.isArray(data.t) ? data.T : null;
var ttStep = TT ? Math.max(0, Math.min(TT.n, +TT.at || 0)) : null;
var NEW_BORDER = "#f08c00";  // amber: stands out on every session colour, dark blue to yellow

function colour(t) {
  t = Math.max(0, Math.min(1, +t || 0));
  var x = t * (STOPS.length - 1), i = Math.min(Math.floor(x), STOPS.length - 2), f = x - i;
  var c = STOPS[i].map(function (v, k) { return Math.round(v + (STOPS[i + 1][k] - v) * f); });
  return "rgb(" + c.join(",") + ")";
}
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
raw.forEach(function (n, i) { byId[n[0]] = n; neighbours[n[0]] = []; stepOf[n[0]] = TT ? +data.t[i] || 0 : 0; });
if (TT) raw.forEach(function (n) { n[4] = (n[4] & 1) | (stepOf[n[0]] === ttStep ? 2 : 0); });
(data.e || []).forEach(function (e) {
  var a = raw[e[0]], b = raw[e[1]];
  if (a && b) { neighbours[a[0]].push(b[0]); neighbours[b[0]].push(a[0]); }
});
// The memories this render is about: the retrieved ones (else the new ones), and their neighbours.
function flagged(bit) { return raw.filter(function (n) { return n[4] & bit; }).map(function (n) { return n[0]; }); }
var marked = flagged(1).length ? flagged(1) : flagged(2);
var focus = {};
marked.forEach(function (id) { focus[id] = true; neighbours[id].forEach(function (x) { focus[x] = true; }); });

function tooltip(n) {
  var s = sessions[n[3]] || ["", ""];
  var box = el("div");
  box.appendChild(el("div", n[1]));
  box.appendChild(el("div", "time: " + n[2]));
  box.appendChild(el("div", "session: " + s[1]));
  if (TT) box.appendChild(el("div", "added at step " + stepOf[n[0]] + " of " + TT.n));
  var marks = [];
  if (n[4] & 1) marks.push("retrieved for this reply");
  if (n[4] & 2) marks.push(TT ? "added by this session" : "new");
  if (marks.length) box.appendChild(el("div", "(" + marks.join(", ") + ")"));
  if (superseded(n)) box.appendChild(el("div", "superseded by: " + byId[n[6]][1] + " (" + byId[n[6]][2] + ")"));
  box.appendChild(el("div", "click: source turns"));
  return box;
}
// A memory a later one replaced (a Changed edge) is kept, drawn faded; in time travel once its successor exists.
function superseded(n) { return !!(n[6] && byId[n[6]] && (!TT || stepOf[n[6]] <= ttStep)); }
function look(n) {
  var c = colour((sessions[n[3]] || [])[2]);
  var retrieved = n[4] & 1, fresh = n[4] & 2;
  // Time travel marks what the step added with a diamond and an amber outline (the legend says so).
  var border = retrieved ? RETRIEVED : (fresh && TT ? NEW_BORDER : c);
  return {shape: retrieved ? "star" : (fresh ? "diamond" : "dot"), size: retrieved ? 22 : (fresh ? 16 : 10),
          borderWidth: retrieved ? 4 : (fresh && TT ? 3 : 1), color: {background: c, border: border},
          opacity: superseded(n) ? 0.3 : 1};
}
function visNode(n, showLabel) {
  var v = look(n);
  v.id = n[0]; v.label = showLabel ? short(n[1], 48) : ""; v.title = tooltip(n);
  v.font = {size: LABEL_PX, strokeWidth: 4, strokeColor: "#ffffff"};
  return v;
}
var nodes = new vis.DataSet(raw.map(function (n) { return visNode(n, !!focus[n[0]]); }));
var rawEdges = (data.e || []).filter(function (e) { return raw[e[0]] && raw[e[1]]; });
// An edge exists from the step of its newer end (the close that linked the new memory to an older one).
function edgeStep(e) { return Math.max(stepOf[raw[e[0]][0]], stepOf[raw[e[1]][0]]); }
function edgeLook(e, i) {
  var v = {id: i};
  if (TT) { var k = edgeStep(e); v.hidden = k > ttStep; v.width = k === ttStep ? 3.5 : 1.2; }
  if (e[2] === "Changed") v.width = Math.max(v.width || 0, 3);  // a change stays visible beside its faded memory
  return v;
}
var edges = new vis.DataSet(rawEdges.map(function (e, i) {
  var v = edgeLook(e, i);
  v.from = raw[e[0]][0]; v.to = raw[e[1]][0]; v.title = e[2]; v.color = RELATIONS[e[2]] || "#9d9d9d";
  v.arrows = {to: {enabled: true, scaleFactor: 0.5}};
  return v;
}));
var network = new vis.Network(document.getElementById("mynetwork"), {nodes: nodes, edges: edges}, {
  physics: {solver: "barnesHut", stabilization: {enabled: true, iterations: 200},
            barnesHut: {gravitationalConstant: -3000, springLength: 110, avoidOverlap: 0.2}},
  edges: {smooth: {type: "continuous"}, width: 1.2},
  interaction: {hover: true, tooltipDelay: 150},
  layout: {randomSeed: 7}         // the same graph is drawn the same way at every render
});

// --- which memories are shown: everything, this reply's neighbourhood, one session; and a search ------
var scope = document.getElementById("scope");
var search = document.getElementById("search");
function option(value, text) { var o = el("option", text); o.value = value; scope.appendChild(o); }
option("all", "Everything (" + raw.length + (data.total > raw.length ? " of " + data.total : "") + ")");
if (TT) option("focus", "What this session added, with its links");
else if (marked.length) option("focus", "This reply's memories and neighbours");
sessions.forEach(function (s, i) { option("s" + i, s[1]); });
if (data.scope && [].some.call(scope.options, function (o) { return o.value === data.scope; })) scope.value = data.scope;

function visibleIds() {
  var q = search.value.trim().toLowerCase(), v = scope.value, out = [];
  raw.forEach(function (n) {
    var inScope = v === "all" || (v === "focus" && focus[n[0]]) || v === "s" + n[3];
    var exists = !TT || stepOf[n[0]] <= ttStep;
    if (exists && inScope && (!q || n[1].toLowerCase().indexOf(q) >= 0)) out.push(n[0]);
  });
  return out;
}
function fitTo(ids, core) {
  if (!ids.length) return;
  network.fit({nodes: ids, animation: false});
  // Zoom out only as far as keeps labels readable, centred on the core (the retrieved memories);
  // a large graph is explored by panning, zoom and search.
  if (network.getScale() * LABEL_PX < 12) {
    var c = (core || []).filter(function (id) { return ids.indexOf(id) >= 0; });
    network.fit({nodes: c.length ? c : ids, animation: false});
    if (network.getScale() * LABEL_PX < 12) network.moveTo({scale: 12 / LABEL_PX, position: densest(c.length ? c : ids)});
  }
  if (network.getScale() > 1.3) network.moveTo({scale: 1.3});    // a few memories: keep some context around
}
// Where to look when the memories do not all fit at a readable scale: the one with most others in view.
function densest(ids) {
  var p = network.getPositions(ids), box = document.getElementById("mynetwork");
  var rx = box.clientWidth / 2 / (12 / LABEL_PX), ry = box.clientHeight / 2 / (12 / LABEL_PX), best = ids[0], most = -1;
  ids.forEach(function (a) {
    var n = ids.filter(function (b) { return Math.abs(p[a].x - p[b].x) < rx * 0.8 && Math.abs(p[a].y - p[b].y) < ry * 0.8; }).length;
    if (n > most) { most = n; best = a; }
  });
  var near = ids.filter(function (b) { return Math.abs(p[best].x - p[b].x) < rx * 0.8 && Math.abs(p[best].y - p[b].y) < ry * 0.8; });
  return centre(near);
}
function centre(ids) {
  var p = network.getPositions(ids), x = 0, y = 0;
  ids.forEach(function (id) { x += p[id].x; y += p[id].y; });
  return {x: x / ids.length, y: y / ids.length};
}
function apply(refit) {
  var show = {}, q = search.value.trim();
  visibleIds().forEach(function (id) { show[id] = true; });
  var labelled = Object.keys(show).length <= 40 ? show : (q ? show : focus);
  nodes.update(raw.map(function (n) {
    var v = TT ? look(n) : {};
    v.id = n[0]; v.hidden = !show[n[0]]; v.label = (labelled[n[0]] || zoomedIn) ? short(n[1], 48) : "";
    return v;
  }));
  document.getElementById("count").textContent = Object.keys(show).length + " shown";
  var lab = Object.keys(show).filter(function (id) { return labelled[id]; });
  if (refit) fitTo(lab.length ? lab : Object.keys(show), q ? lab : marked);
  return Object.keys(show).length;
}
var zoomedIn = false;
network.on("zoom", function () {
  var z = network.getScale() * LABEL_PX >= 16;      // zoomed in: every visible memory gets its label
  if (z !== zoomedIn) { zoomedIn = z; apply(false); }
});
search.addEventListener("input", function () { apply(true); });
scope.addEventListener("change", function () { apply(true); });
var ready = false, pending = null;
if (TT) document.getElementById("count").textContent = "drawing " + raw.length + " memories…";
network.once("stabilizationIterationsDone", function () {
  network.setOptions({physics: false});
  ready = true;
  if (TT) { showStep(pending === null ? ttStep : pending); } else apply(true);
  window.graphReady = true;
  if (TT && window.parent !== window) window.parent.postMessage({ttReady: true}, "*");
});

// --- time travel: the app posts {ttStep: k}; memories added after session k are hidden, session k's marked -----
function showStep(k) {
  ttStep = k;
  raw.forEach(function (n) { n[4] = (n[4] & 1) | (stepOf[n[0]] === k ? 2 : 0); });
  marked = flagged(2);
  focus = {};
  marked.forEach(function (id) { focus[id] = true; neighbours[id].forEach(function (x) { if (stepOf[x] <= k) focus[x] = true; }); });
  edges.update(rawEdges.map(edgeLook));
  var shown = apply(true);
  var label = (TT.labels || [])[k] || ("step " + k);
  document.getElementById("count").textContent = shown + " memories " + (k ? "after " + label : "(" + label + ")");
  var mark = document.getElementById("legend-new");
  if (mark) mark.textContent = "◆ added by this session (" + marked.length + ")";
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
network.on("click", function (p) {
  if (!p.nodes.length) { panel.hidden = true; return; }
  var n = byId[p.nodes[0]], s = sessions[n[3]] || ["", ""];
  panel.textContent = "";
  var close = el("button", "×"); close.setAttribute("aria-label", "Close");
  close.onclick = function () { panel.hidden = true; };
  panel.appendChild(close);
  panel.appendChild(el("h3", n[1]));
  panel.appendChild(el("div", s[1] + " · " + n[2]));
  var turns = n[5] || [];
  panel.appendChild(el("h3", turns.length ? "Source turns" : "No source turns recorded"));
  turns.forEach(function (t) {
    var d = el("div", undefined, "turn");
    d.appendChild(el("span", t[0] + ": ", "who"));
    d.appendChild(el("span", t[1]));
    panel.appendChild(d);
  });
  panel.hidden = false;
});

// --- legend: one colour scale, the marks, the relations present ----------------------------------
(function legend() {
  var box = document.getElementById("legend");
  if (sessions.length) {
    var sc = el("span", undefined, "scale");
    sc.appendChild(el("span", sessions[0][1].split(" · ").slice(-1)[0]));
    var ramp = el("span", undefined, "ramp");
    ramp.style.background = "linear-gradient(90deg," + [0, .25, .5, .75, 1].map(colour).join(",") + ")";
    sc.appendChild(ramp);
    sc.appendChild(el("span", sessions[sessions.length - 1][1].split(" · ").slice(-1)[0]));
    sc.title = sessions.length + " sessions, coloured by date";
    box.appendChild(sc);
  }
  if (!TT) box.appendChild(el("span", "★ retrieved (" + raw.filter(function (n) { return n[4] & 1; }).length + ")"));
  var fresh = el("span", (TT ? "◆ added by this session (" : "◆ new (") + raw.filter(function (n) { return n[4] & 2; }).length + ")");
  fresh.id = "legend-new";
  if (TT) { fresh.title = "Diamonds with an amber outline and thick edges: what this session added and linked"; fresh.style.borderBottom = "3px solid " + NEW_BORDER; }
  box.appendChild(fresh);
  var faded = raw.filter(superseded).length;
  if (faded) { var f = el("span", "faded: superseded (" + faded + ")"); f.title = "Memories a later one replaced (Changed): kept as history"; box.appendChild(f); }
  var present = {};
  (data.e || []).forEach(function (e) { present[e[2]] = true; });
  Object.keys(RELATIONS).filter(function (r) { return present[r]; }).forEach(function (r) {
    var s = el("span", r, "rel"); s.style.borderColor = RELATIONS[r]; box.appendChild(s);
  });
  // A legend that wraps on a narrow frame pushes the graph down instead of covering it.
  var wrap = document.getElementById("wrap");
  wrap.style.top = Math.max(58, box.offsetTop + box.offsetHeight) + "px";
})();

// For tests: each retrieved memory's label and its on-screen font size at the current zoom.
window.labelCheck = function () {
  var scale = network.getScale();
  return raw.filter(function (n) { return n[4] & 1; }).map(function (n) {
    var v = nodes.get(n[0]);
    var p = network.canvasToDOM(network.getPositions([n[0]])[n[0]]), box = document.getElementById("mynetwork");
    return {id: n[0], label: v.label, hidden: !!v.hidden, px: scale * LABEL_PX,
            inView: p.x >= 0 && p.y >= 0 && p.x <= box.clientWidth && p.y <= box.clientHeight};
  });
};
