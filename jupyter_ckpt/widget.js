// The browser half of jupyter_ckpt.widget.Timeline: draws the traits, sends back clicks.

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) el.setAttribute(key, value);
  }
  el.append(...children.flat().filter((c) => c !== null && c !== undefined));
  return el;
}

function humanBytes(n) {
  if (n === null || n === undefined || n < 0) return "-";
  let size = n;
  for (const unit of ["B", "KiB", "MiB", "GiB"]) {
    if (size < 1024 || unit === "GiB") return unit === "B" ? `${size} B` : `${size.toFixed(1)} ${unit}`;
    size /= 1024;
  }
}

const basename = (path) => path.split(/[\\/]/).pop();
const clock = (t) => new Date(t * 1000).toLocaleTimeString([], { hour12: false });
const cell = (c) => (c === null || c === undefined ? "" : `[${c}]`);

function shape(info) {
  if (info.shape) return info.shape.length === 1 ? `(${info.shape[0]},)` : `(${info.shape.join(", ")})`;
  if (info.length !== undefined) return `len ${info.length}`;
  return "";
}

// A value in one line: its repr when that is short, else its shape (or type) and size.
function brief(info) {
  if (info.repr.length <= 60 && !info.repr.includes("\n")) return info.repr;
  return `${shape(info) || info.type} ${humanBytes(info.size)}`;
}

// A checkpoint's number in the session, as the rows show it.
function label(model, id) {
  const r = model.get("rows").find((r) => r.id === id);
  return r ? `#${r.number}` : `(id ${id})`;
}

function row(r, model) {
  const classes = ["ckpt-row"];
  if (r.id === model.get("selected")) classes.push("ckpt-selected");
  if (r.id === model.get("head")) classes.push("ckpt-head");
  const select = () => {
    model.set("selected", r.id);
    model.save_changes();
  };
  return h(
    "li",
    { class: classes.join(" "), "data-id": r.id, style: `padding-left: ${0.5 + 1.25 * r.depth}em`, onclick: select },
    r.branch_from !== null ? h("span", { class: "ckpt-branch" }, `↳ from ${label(model, r.branch_from)}`) : null,
    h("span", { class: "ckpt-id", title: `id ${r.id}` }, `#${r.number}`),
    h("span", { class: "ckpt-time" }, clock(r.time)),
    h("span", { class: "ckpt-cell" }, cell(r.cell)),
    h("span", { class: "ckpt-trigger" }, r.trigger),
    h("span", { class: `ckpt-status ckpt-status-${r.status}` }, r.status),
    h("span", { class: "ckpt-size" }, humanBytes(r.new_bytes)),
    h("span", { class: "ckpt-changed" }, r.changed.join(", ")),
    r.tag ? h("span", { class: "ckpt-tag" }, r.tag) : null,
  );
}

function variablesTable(d) {
  const names = Object.keys(d.variables).sort();
  if (!names.length) return h("p", { class: "ckpt-empty" }, "no variables");
  const touched = new Set([...Object.keys(d.diff.added), ...Object.keys(d.diff.changed)]);
  return h(
    "table",
    { class: "ckpt-variables" },
    h("tr", {}, ["name", "type", "shape", "size", "value"].map((c) => h("th", {}, c))),
    names.map((name) => {
      const v = d.variables[name];
      return h(
        "tr",
        { class: touched.has(name) ? "ckpt-touched" : null },
        h("td", { class: "ckpt-name" }, name),
        h("td", {}, v.type),
        h("td", {}, shape(v)),
        h("td", {}, humanBytes(v.size)),
        h("td", { class: "ckpt-repr" }, v.repr),
      );
    }),
  );
}

function diffList(diff) {
  const items = [
    ...Object.entries(diff.added).map(([n, v]) => h("li", { class: "ckpt-added" }, `+ ${n} = ${brief(v)}`)),
    ...Object.entries(diff.removed).map(([n, v]) => h("li", { class: "ckpt-removed" }, `− ${n} (was ${brief(v)})`)),
    ...Object.entries(diff.changed).map(([n, c]) =>
      h("li", { class: "ckpt-changed-var" }, `~ ${n}: ${brief(c.before)} → ${brief(c.after)}`),
    ),
  ];
  return items.length ? h("ul", { class: "ckpt-diff" }, items) : h("p", { class: "ckpt-empty" }, "no changes");
}

function detailsPane(model) {
  const d = model.get("details");
  if (!d || d.id === undefined) return h("p", { class: "ckpt-empty" }, "Select a checkpoint to see its variables.");
  const act = (action, extra = {}) => model.send({ action, id: d.id, ...extra });
  const tagInput = h("input", { class: "ckpt-tag-input", placeholder: "tag", value: d.tag || "" });
  const confirmDelete = () => {
    if (window.confirm(`Delete kernel checkpoint ${label(model, d.id)}?`)) act("delete");
  };
  return h(
    "div",
    {},
    h("h4", {}, `Kernel checkpoint ${label(model, d.id)} ${cell(d.cell)} · ${clock(d.time)} · ${d.trigger} · ${d.status}`),
    d.message ? h("p", { class: "ckpt-message" }, d.message) : null,
    h(
      "div",
      { class: "ckpt-actions" },
      h("button", { class: "ckpt-restore", onclick: () => act("restore") }, "Restore"),
      tagInput,
      h("button", { class: "ckpt-tag-button", onclick: () => act("tag", { tag: tagInput.value.trim() }) }, "Tag"),
      h("button", { class: "ckpt-delete", onclick: confirmDelete }, "Delete"),
    ),
    h("h5", {}, "Changes from the previous checkpoint"),
    diffList(d.diff),
    h("h5", {}, "Variables"),
    variablesTable(d),
  );
}

function render({ model, el }) {
  const list = h("ul", { class: "ckpt-list" });
  const pane = h("div", { class: "ckpt-details" });
  const status = h("div", { class: "ckpt-status-line" });
  el.append(
    h(
      "div",
      { class: "ckpt-timeline" },
      h("div", { class: "ckpt-header", title: model.get("session") }, `Checkpoints · ${basename(model.get("session"))}`),
      h("div", { class: "ckpt-body" }, list, pane),
      status,
    ),
  );
  const drawList = () => {
    const rows = model.get("rows");
    list.replaceChildren(...(rows.length ? rows.map((r) => row(r, model)) : [h("li", {}, "no checkpoints yet")]));
  };
  const drawDetails = () => pane.replaceChildren(detailsPane(model));
  const drawStatus = () => {
    status.textContent = model.get("message");
    status.classList.toggle("ckpt-error", model.get("error"));
  };
  model.on("change:rows change:head change:selected", drawList);
  model.on("change:details", drawDetails);
  model.on("change:message change:error", drawStatus);
  drawList();
  drawDetails();
  drawStatus();
  return () => {
    model.off("change:rows change:head change:selected", drawList);
    model.off("change:details", drawDetails);
    model.off("change:message change:error", drawStatus);
  };
}

export default { render };
