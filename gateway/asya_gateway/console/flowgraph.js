// The drawing of a flow written as Python (GW-MESH-1): an inline SVG laid out here from the graph the gateway sends
// (nodes and edges of asya.flows.render, the model of `asya flow show`'s DOT and Mermaid), no renderer, no CDN, so
// the console works offline. Layout: layers by longest path from `start` over the forward edges (a loop's back edge
// is found by depth-first search and drawn through the gaps between rows and a lane on the right, clear of every
// node), nodes in a layer ordered by their parents' positions.
// Labels are untrusted data: they go into SVG text nodes (textContent) only.
//
// flowPath() turns the actors a task visited, in order, into the nodes and edges to highlight: from where the task
// is, the shortest way along the edges to the next node naming that actor, passing tests, mutations, pauses and
// empty fan-outs but no other call. When two branches reach the same next actor with no call between, the drawing
// cannot tell which test answer was taken and marks the first found (the flow state is not in the history).

const SVG = "http://www.w3.org/2000/svg";
const NODE_H = 34;
const LAYER_GAP = 74;
const NODE_GAP = 34;
const MAX_LABEL = 40;
let drawings = 0;

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined) node.setAttribute(name, String(value));
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function text(attrs, value) {
  const node = svg("text", attrs);
  node.textContent = String(value);
  return node;
}

function short(label) {
  const value = String(label);
  return value.length > MAX_LABEL ? value.slice(0, MAX_LABEL - 1) + "…" : value;
}

function valid(graph) {
  return graph && Array.isArray(graph.nodes) && Array.isArray(graph.edges) && graph.nodes.length > 0;
}

function outgoing(graph) {
  const out = new Map(graph.nodes.map((node) => [node.id, []]));
  graph.edges.forEach((edge, index) => {
    if (out.has(edge.from) && out.has(edge.to)) out.get(edge.from).push({ ...edge, index });
  });
  return out;
}

// Edge indexes that close a cycle (depth-first from `start`, children in edge order).
function backEdges(graph, out) {
  const back = new Set();
  const state = new Map();
  const visit = (id) => {
    state.set(id, "open");
    for (const edge of out.get(id) || []) {
      const seen = state.get(edge.to);
      if (seen === "open") back.add(edge.index);
      else if (!seen) visit(edge.to);
    }
    state.set(id, "done");
  };
  visit(graph.nodes[0].id);
  for (const node of graph.nodes) if (!state.has(node.id)) visit(node.id);
  return back;
}

export function layoutFlow(graph) {
  const out = outgoing(graph);
  const back = backEdges(graph, out);
  const order = new Map(graph.nodes.map((node, index) => [node.id, index]));
  const incoming = new Map(graph.nodes.map((node) => [node.id, 0]));
  graph.edges.forEach((edge, index) => {
    if (!back.has(index) && incoming.has(edge.to) && out.has(edge.from)) incoming.set(edge.to, incoming.get(edge.to) + 1);
  });
  const rank = new Map(graph.nodes.map((node) => [node.id, 0]));
  const ready = graph.nodes.filter((node) => incoming.get(node.id) === 0).map((node) => node.id);
  while (ready.length) {
    const id = ready.shift();
    for (const edge of out.get(id)) {
      if (back.has(edge.index)) continue;
      rank.set(edge.to, Math.max(rank.get(edge.to), rank.get(id) + 1));
      incoming.set(edge.to, incoming.get(edge.to) - 1);
      if (incoming.get(edge.to) === 0) ready.push(edge.to);
    }
  }
  const layers = [];
  for (const node of graph.nodes) (layers[rank.get(node.id)] ||= []).push(node);
  const box = new Map();
  const parents = new Map(graph.nodes.map((node) => [node.id, []]));
  graph.edges.forEach((edge, index) => {
    if (!back.has(index) && parents.has(edge.to)) parents.get(edge.to).push(edge.from);
  });
  let width = 0;
  layers.forEach((layer = [], depth) => {
    // under their parents: order by the parents' mean x (then program order), then place left to right
    const mean = (node) => {
      const xs = parents.get(node.id).filter((id) => box.has(id)).map((id) => box.get(id).cx);
      return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
    };
    layer.sort((a, b) => mean(a) - mean(b) || order.get(a.id) - order.get(b.id));
    let x = 20;
    for (const node of layer) {
      const w = Math.max(70, Math.min(300, short(node.label).length * 7 + 28));
      box.set(node.id, { x, y: 20 + depth * LAYER_GAP, w, h: NODE_H, cx: x + w / 2 });
      x += w + NODE_GAP;
    }
    width = Math.max(width, x);
  });
  // centre each layer on the widest one
  layers.forEach((layer = []) => {
    if (!layer.length) return;
    const last = box.get(layer[layer.length - 1].id);
    const shift = (width - (last.x + last.w + NODE_GAP)) / 2;
    for (const node of layer) {
      const b = box.get(node.id);
      b.x += shift;
      b.cx += shift;
    }
  });
  const height = 20 + layers.length * LAYER_GAP;
  return { box, back, width: width + 60, height };
}

function shape(kind, b) {
  const { x, y, w, h } = b;
  if (kind === "test") {
    const d = 14;
    return svg("polygon", { points: [[x, y + h / 2], [x + d, y], [x + w - d, y], [x + w, y + h / 2], [x + w - d, y + h], [x + d, y + h]].join(" ") });
  }
  if (kind === "fanout" || kind === "map") {
    const d = 10;
    return svg("polygon", { points: [[x + d, y], [x + w, y], [x + w - d, y + h], [x, y + h]].join(" ") });
  }
  const round = kind === "start" || kind === "end" ? h / 2 : kind === "pause" ? 12 : 4;
  return svg("rect", { x, y, width: w, height: h, rx: round });
}

// A polyline through `points` with its corners rounded (radius up to `r`, less where a leg is shorter).
function rounded(points, r = 8) {
  let d = `M ${points[0][0]} ${points[0][1]}`;
  for (let i = 1; i < points.length - 1; i++) {
    const [px, py] = points[i - 1];
    const [x, y] = points[i];
    const [nx, ny] = points[i + 1];
    const inLen = Math.hypot(x - px, y - py);
    const outLen = Math.hypot(nx - x, ny - y);
    const k = Math.min(r, inLen / 2, outLen / 2);
    const ax = x - ((x - px) / (inLen || 1)) * k;
    const ay = y - ((y - py) / (inLen || 1)) * k;
    const bx = x + ((nx - x) / (outLen || 1)) * k;
    const by = y + ((ny - y) / (outLen || 1)) * k;
    d += ` L ${ax} ${ay} Q ${x} ${y}, ${bx} ${by}`;
  }
  const [lx, ly] = points[points.length - 1];
  return d + ` L ${lx} ${ly}`;
}

function edgePath(edge, from, to, back, right, boxes) {
  if (back || to.y <= from.y) {
    // a loop's way back (or a jump up) keeps to the empty space: a step out of the right side, down into the gap
    // under its row, along that gap to a lane right of every node, up that lane to the gap over the target's row,
    // and down into the target's top; rows and lanes hold no node, so it never runs behind one
    const lane = right + 18 + (edge.index % 3) * 8;
    const gap = LAYER_GAP - NODE_H;
    const step = from.x + from.w + Math.min(10, NODE_GAP / 3);
    const below = from.y + from.h + gap / 4 + (edge.index % 3) * 3;
    const above = to.y - gap / 4 - (edge.index % 3) * 3;
    const into = to.x + to.w - Math.min(14, to.w / 4);
    const d = rounded([[from.x + from.w, from.y + from.h / 2], [step, from.y + from.h / 2], [step, below], [lane, below],
      [lane, above], [into, above], [into, to.y]]);
    return { d, lx: lane + 4, ly: (below + above) / 2 };
  }
  const x1 = from.cx;
  const y1 = from.y + from.h;
  const x2 = to.cx;
  const y2 = to.y;
  // an edge that skips layers would cross the nodes between: round it by the left of them instead
  const between = boxes.filter((b) => b.y > from.y && b.y < to.y && b.x < Math.max(x1, x2) + 6 && b.x + b.w > Math.min(x1, x2) - 6);
  if (between.length) {
    // a cubic's middle is 1/8 of each end and 3/4 of its control points: put that middle 12 px left of the nodes
    const clear = Math.min(...between.map((b) => b.x)) - 12 - (edge.index % 3) * 6;
    const left = (clear - 0.125 * (x1 + x2)) / 0.75;
    return { d: `M ${x1} ${y1} C ${left} ${y1 + 30}, ${left} ${y2 - 30}, ${x2} ${y2}`, lx: clear + 4, ly: (y1 + y2) / 2 };
  }
  const bend = Math.min(40, (y2 - y1) / 2);
  return { d: `M ${x1} ${y1} C ${x1} ${y1 + bend}, ${x2} ${y2 - bend}, ${x2} ${y2}`, lx: (x1 + x2) / 2 + 4, ly: (y1 + y2) / 2 };
}

// An <svg> of `graph`; `path` ({nodes, edges, failed}) marks what a task visited.
export function drawFlow(graph, name, path = null) {
  if (!valid(graph)) return null;
  const { box, back, width, height } = layoutFlow(graph);
  const marker = "flow-arrow-" + ++drawings;
  const markerOn = marker + "-on";
  const arrow = (id, cls) => svg("marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse", class: cls },
    svg("path", { d: "M 0 0 L 10 5 L 0 10 z" }));
  const boxes = [...box.values()];
  const right = Math.max(...boxes.map((b) => b.x + b.w));
  const root = svg("svg", { class: "flow-graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": "flow " + name, "data-testid": "flow-graph", "data-flow": name },
  svg("defs", {}, arrow(marker, "flow-arrowhead"), arrow(markerOn, "flow-arrowhead visited")));
  graph.edges.forEach((edge, index) => {
    const from = box.get(edge.from);
    const to = box.get(edge.to);
    if (!from || !to) return;
    const visited = Boolean(path && path.edges.has(index));
    const { d, lx, ly } = edgePath({ ...edge, index }, from, to, back.has(index), right, boxes);
    const group = svg("g", { class: "flow-edge" + (edge.dashed ? " dashed" : "") + (visited ? " visited" : ""),
      "data-from": edge.from, "data-to": edge.to, "data-visited": String(visited) },
    svg("path", { d, "marker-end": `url(#${visited ? markerOn : marker})` }));
    if (edge.label) group.append(text({ x: lx, y: ly, class: "flow-edge-label" }, short(edge.label)));
    root.append(group);
  });
  for (const node of graph.nodes) {
    const b = box.get(node.id);
    const visited = Boolean(path && path.nodes.has(node.id));
    const failed = Boolean(path && path.failed === node.id);
    const kind = String(node.kind);
    const title = svg("title");
    title.textContent = String(node.label);
    root.append(svg("g", { class: "flow-node kind-" + kind.replace(/[^a-z]/g, "") + (visited ? " visited" : "") + (failed ? " failed" : ""),
      "data-node": node.id, "data-kind": kind, "data-visited": String(visited) },
    title, shape(kind, b), text({ x: b.cx, y: b.y + b.h / 2 + 4, "text-anchor": "middle" }, short(node.label))));
  }
  return root;
}

// The actors a task visited, in order: its own steps of the run history (first attempts, the crew that ends a task
// left out), else the route its last status event carried (`prev` and `curr`).
export function visitedActors(view, steps) {
  const ending = new Set(["x-sink", "x-sump"]);
  if (Array.isArray(steps) && steps.length) {
    return steps.filter((step) => step && step.envelope_id === view.id && !(step.attempt > 1) && !ending.has(step.actor))
      .map((step) => String(step.actor));
  }
  const data = view.data || {};
  if (Array.isArray(data.prev)) {
    return [...data.prev, ...(typeof data.curr === "string" && data.curr ? [data.curr] : [])].map(String).filter((a) => !ending.has(a));
  }
  return [];
}

// {nodes: Set of ids, edges: Set of edge indexes, at, failed} along `actors` from `start`; on to `done` when
// `ended`, to the pause it waits at when `paused`.
export function flowPath(graph, actors, { ended = false, paused = false, failedActor = null } = {}) {
  const path = { nodes: new Set(), edges: new Set(), at: null, failed: null };
  if (!valid(graph)) return path;
  const out = outgoing(graph);
  const kinds = new Map(graph.nodes.map((node) => [node.id, node]));
  const names = (id) => (kinds.get(id) && Array.isArray(kinds.get(id).actors) ? kinds.get(id).actors : []);
  const reach = (from, goal) => {
    // breadth-first, at least one edge; only actor-less nodes and fan-outs (an empty map sends nothing) are passed
    const previous = new Map();
    const queue = [from];
    const seen = new Set([from]);
    while (queue.length) {
      const id = queue.shift();
      for (const edge of out.get(id) || []) {
        if (seen.has(edge.to)) continue;
        seen.add(edge.to);
        previous.set(edge.to, edge);
        if (goal(edge.to)) {
          const steps = [];
          for (let at = edge.to; at !== from; at = previous.get(at).from) steps.push(previous.get(at));
          return steps.reverse();
        }
        // a pause is passed too: the recorded history holds the layer's hops only, never x-pause's or x-resume's,
        // so a call after a pause follows the call before it
        const kind = kinds.get(edge.to).kind;
        if (kind !== "call" && kind !== "end") queue.push(edge.to);
      }
    }
    return null;
  };
  let at = graph.nodes[0].id;
  path.nodes.add(at);
  for (const actor of actors) {
    const steps = reach(at, (id) => names(id).includes(actor));
    if (!steps) continue;  // not a node of the drawing (x-resume, a retry's hop)
    for (const edge of steps) {
      path.edges.add(edge.index);
      path.nodes.add(edge.to);
    }
    at = steps[steps.length - 1].to;
  }
  const finish = (kind) => {
    const steps = reach(at, (id) => kinds.get(id).kind === kind);
    for (const edge of steps || []) {
      path.edges.add(edge.index);
      path.nodes.add(edge.to);
    }
    if (steps) at = steps[steps.length - 1].to;
  };
  if (ended) finish("end");
  if (paused && kinds.get(at).kind !== "pause") finish("pause");
  if (failedActor && names(at).includes(failedActor)) path.failed = at;
  path.at = at;
  return path;
}
