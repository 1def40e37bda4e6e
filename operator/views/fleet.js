// shoal's fleet page: draws the document of shoal/views/fleet.py. No library, no build step.
// Offline (shoal simulate --html) the document is embedded; live (shoal run --web) the page polls
// its data-source (/fleet/data.json) and draws again, keeping what the viewer picked.
(function () {
  "use strict";
  const root = document.getElementById("fleet");
  const live = root.dataset.live === "1";
  const every = Number(root.dataset.interval || "2000");
  let doc = JSON.parse(document.getElementById("fleet-data").textContent);
  let picked = { node: null, gang: null, pod: null };
  // explanations fetched on click (live): pod -> the trimmed explanation, or a message
  const fetched = {};

  function esc(value) {
    return String(value === null || value === undefined ? "" : value).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function gb(value) {
    return value === null || value === undefined ? "?" : value.toFixed(1) + " GB";
  }

  function summary() {
    const s = doc.summary;
    const items = [
      ["nodes", s.nodes],
      ["GPUs used", s.gpusUsed + " / " + s.gpus],
      ["GPU memory free", gb(s.gpuMemoryFreeGB) + " of " + gb(s.gpuMemoryGB)],
      ["pods bound", s.podsBound],
      ["pending", s.pending],
      ["gangs placed", s.gangsPlaced],
      ["gangs waiting", s.gangsWaiting],
    ];
    document.getElementById("summary").innerHTML = items
      .map(function (kv) {
        return '<div data-key="' + esc(kv[0]) + '">' + esc(kv[0]) + " <b>" + esc(kv[1]) + "</b></div>";
      })
      .join("");
  }

  // nodes grouped by the topology levels, outermost first; leaves are tiles filled by GPU use
  function tree() {
    const gangNodes = new Set();
    if (picked.gang !== null) {
      const g = doc.gangs.find(function (x) { return x.name === picked.gang; });
      if (g) g.nodes.forEach(function (n) { gangNodes.add(n); });
    }
    function tile(n) {
      const used = n.gpus ? Math.min(1, n.gpusUsed / n.gpus) : 0;
      const cls = ["node"];
      if (n.gpus || n.devices.length) cls.push("gpu");
      if (n.unschedulable) cls.push("cordoned");
      if (n.name === picked.node) cls.push("picked");
      if (gangNodes.has(n.name)) cls.push("in-gang");
      const title = n.name + ": " + n.gpusUsed + "/" + n.gpus + " GPUs used, " + gb(n.gpuMemoryFreeGB) +
        " GPU memory free, " + n.pods + " pods";
      return '<div class="' + cls.join(" ") + '" data-node="' + esc(n.name) + '" title="' + esc(title) +
        '"><div class="fill" style="height:' + Math.round(used * 100) + '%"></div></div>';
    }
    function group(nodes, depth) {
      if (depth >= doc.levels.length) {
        return '<div class="tiles">' + nodes.map(tile).join("") + "</div>";
      }
      const byValue = new Map();
      nodes.forEach(function (n) {
        const v = n.path[depth] || "";
        if (!byValue.has(v)) byValue.set(v, []);
        byValue.get(v).push(n);
      });
      const keys = Array.from(byValue.keys()).sort();
      return keys
        .map(function (v) {
          const members = byValue.get(v);
          const gpus = members.reduce(function (a, n) { return a + n.gpus; }, 0);
          const used = members.reduce(function (a, n) { return a + n.gpusUsed; }, 0);
          const free = members.reduce(function (a, n) { return a + (n.gpuMemoryFreeGB || 0); }, 0);
          const label = doc.levels[depth].split("/").pop();
          return '<div class="dom" data-level="' + esc(doc.levels[depth]) + '" data-value="' + esc(v) + '">' +
            '<div class="dom-head"><b>' + esc(label) + " " + esc(v || "(none)") + "</b> · " + members.length +
            " nodes · " + used + "/" + gpus + " GPUs used · " + gb(free) + " free</div>" +
            group(members, depth + 1) + "</div>";
        })
        .join("");
    }
    const el = document.getElementById("nodes");
    el.innerHTML = doc.nodes.length ? group(doc.nodes, 0) : '<p class="empty">no nodes</p>';
  }

  function nodeDetail() {
    const el = document.getElementById("node-detail");
    const n = doc.nodes.find(function (x) { return x.name === picked.node; });
    if (!n) {
      el.innerHTML = '<p class="empty">pick a node</p>';
      return;
    }
    let html = "<h2>" + esc(n.name) + "</h2><p>" + esc(n.path.join(" / ")) + "<br>" + n.gpusUsed + "/" + n.gpus +
      " GPUs used · GPU memory " + gb(n.gpuMemoryFreeGB) + " free of " + gb(n.gpuMemoryGB) +
      (n.gpuMemorySource ? " (" + esc(n.gpuMemorySource) + ")" : "") + " · " + n.pods + " pods" +
      (n.unschedulable ? " · cordoned" : "") + "</p>";
    if (n.devices.length) {
      html += "<table><tr><th>device</th><th>kind</th><th>memory</th><th>held by</th></tr>" +
        n.devices
          .map(function (d) {
            const held = d.kind === "shared" ? gb(d.sharedGB) + " shared out" : (d.claim || "free");
            return "<tr><td>" + esc(d.name) + (d.tainted ? " ⚠" : "") + "</td><td>" + esc(d.kind) + "</td><td>" +
              gb(d.memoryGB) + "</td><td>" + esc(held) + "</td></tr>";
          })
          .join("") + "</table>";
    }
    el.innerHTML = html;
  }

  function gangs() {
    const el = document.getElementById("gangs");
    if (!doc.gangs.length) {
      el.innerHTML = '<p class="empty">no gangs</p>';
      return;
    }
    el.innerHTML = "<table><tr><th>gang</th><th>state</th><th>placed</th><th>domain</th><th>worst cost</th></tr>" +
      doc.gangs
        .map(function (g) {
          const open = g.name === picked.gang;
          let row = '<tr class="clickable" data-gang="' + esc(g.name) + '"><td>' + esc(g.name) + '</td><td class="state-' +
            esc(g.state) + '">' + esc(g.state) + "</td><td>" + g.placed + " of " + g.min + " (" + g.members +
            " members)</td><td>" + esc(g.domain || "") + "</td><td>" + (g.worstCost === null ? "" : g.worstCost) +
            "</td></tr>";
          if (open && g.lines.length) {
            row += '<tr><td colspan="5"><pre>' + esc(g.lines.join("\n")) + "</pre></td></tr>";
          }
          return row;
        })
        .join("") + "</table>";
  }

  // shoal explain -o json's document, trimmed as the embedded explanations are (fleet.py pending_doc)
  function trimmed(full) {
    const fits = full.nodes.filter(function (n) { return n.result === "fits"; });
    const counts = {};
    full.nodes.filter(function (n) { return n.result !== "fits"; }).forEach(function (n) {
      (n.reasons.length ? n.reasons : [""]).forEach(function (r) {
        const k = n.plugin + "\u0000" + r;
        counts[k] = (counts[k] || 0) + 1;
      });
    });
    const rejections = Object.keys(counts).map(function (k) {
      const parts = k.split("\u0000");
      return { plugin: parts[0], reason: parts[1], nodes: counts[k] };
    }).sort(function (a, b) { return b.nodes - a.nodes; });
    return { pod: full.pod, message: full.message, explained: true, gang: full.gang, preemption: full.preemption,
      claims: full.claims, fits: fits.length, best: fits.slice(0, 10), rejections: rejections };
  }

  function fetchExplanation(pod) {
    fetched[pod] = { loading: true };
    fetch(root.dataset.explain + "?pod=" + encodeURIComponent(pod), { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.json().then(function (body) { return { ok: r.ok, body: body }; }); })
      .then(function (res) {
        fetched[pod] = res.ok && res.body.nodes ? trimmed(res.body) :
          { message: res.body.error || ("bound to " + res.body.boundTo) };
      })
      .catch(function (err) { fetched[pod] = { message: "could not explain: " + err.message }; })
      .finally(draw);
  }

  function explanation(p) {
    if (!p.explained && root.dataset.explain) {
      const got = fetched[p.pod];
      if (!got) fetchExplanation(p.pod);
      if (!got || got.loading) return '<div class="why empty">explaining…</div>';
      if (!got.explained) return '<div class="why empty">' + esc(got.message) + "</div>";
      p = got;
    }
    if (!p.explained) return '<div class="why empty">not explained here: run shoal explain ' + esc(p.pod) + "</div>";
    let html = '<div class="why">';
    (p.gang || []).concat(p.claims || []).forEach(function (line) { html += "<pre>" + esc(line) + "</pre>"; });
    if (p.preemption) {
      html += "<pre>" + esc(p.preemption.node ? "would preempt " + p.preemption.victims.join(", ") + " on " +
        p.preemption.node : p.preemption.message) + "</pre>";
    }
    if (p.best.length) {
      const plugins = Object.keys(p.best[0].scores);
      html += "<table><tr><th>node</th><th>score</th>" + plugins.map(function (k) { return "<th>" + esc(k) + "</th>"; }).join("") +
        "</tr>" + p.best.map(function (n) {
          return '<tr><td>' + esc(n.name) + "</td><td>" + n.score + "</td>" + plugins.map(function (k) {
            return "<td>" + esc(n.scores[k]) + "</td>";
          }).join("") + "</tr>";
        }).join("") + "</table>";
      if (p.fits > p.best.length) html += '<p class="empty">and ' + (p.fits - p.best.length) + " more nodes fit</p>";
    }
    if (p.rejections.length) {
      html += "<table><tr><th>rejected by</th><th>reason</th><th>nodes</th></tr>" + p.rejections.map(function (r) {
        return "<tr><td>" + esc(r.plugin) + "</td><td>" + esc(r.reason) + "</td><td>" + r.nodes + "</td></tr>";
      }).join("") + "</table>";
    }
    return html + "</div>";
  }

  function pending() {
    const el = document.getElementById("pending");
    if (!doc.pending.length) {
      el.innerHTML = '<p class="empty">no pod is waiting</p>';
      return;
    }
    el.innerHTML = '<ul class="pods">' + doc.pending
      .map(function (p) {
        return '<li class="pod" data-pod="' + esc(p.pod) + '"><b>' + esc(p.pod) + '</b> <span class="msg">' + esc(p.message) +
          "</span>" + (p.pod === picked.pod ? explanation(p) : "") + "</li>";
      })
      .join("") + "</ul>" + (doc.pendingNotShown ? '<p class="empty">and ' + doc.pendingNotShown + " more</p>" : "");
  }

  function draw() {
    summary();
    tree();
    nodeDetail();
    gangs();
    pending();
    const meta = document.getElementById("meta");
    meta.textContent = "profile " + (doc.profile || "none") + " · " + doc.generated + (live ? " · live" : " · snapshot");
    meta.classList.remove("stale");
    root.dataset.generated = doc.generated;
  }

  document.addEventListener("click", function (ev) {
    const t = ev.target.closest("[data-node],[data-gang],[data-pod]");
    if (!t || ev.target.closest(".why")) return;
    if (t.dataset.node) picked.node = picked.node === t.dataset.node ? null : t.dataset.node;
    else if (t.dataset.gang) picked.gang = picked.gang === t.dataset.gang ? null : t.dataset.gang;
    else if (t.dataset.pod) {
      picked.pod = picked.pod === t.dataset.pod ? null : t.dataset.pod;
      delete fetched[t.dataset.pod]; // a fresh explanation each time a pod is opened
    }
    draw();
  });

  function poll() {
    fetch(root.dataset.source || "data.json", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (next) {
        doc = next;
        draw();
      })
      .catch(function (err) {
        const meta = document.getElementById("meta");
        meta.textContent = "not updated: " + err.message + " (last " + doc.generated + ")";
        meta.classList.add("stale");
      })
      .finally(function () { setTimeout(poll, every); });
  }

  draw();
  // when the first view was drawn, from the start of navigation (bench/fleet_page.py reads it)
  root.dataset.firstDrawMs = String(Math.round(performance.now()));
  if (live) setTimeout(poll, every);
})();
