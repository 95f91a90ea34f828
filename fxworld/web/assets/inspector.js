// The fxworld inspector's script: live rows, Approve / Deny / Stop. No framework,
// nothing fetched from elsewhere. Every row's HTML comes escaped from the server;
// streamed text is added as text (textContent), never as markup.
(function () {
  "use strict";
  var root = document.body.dataset.root || "";

  function post(path, body) {
    return fetch(root + path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body || {}),
    }).then(function (r) {
      return r.json().then(function (answer) {
        if (!r.ok) throw new Error(answer.message || "HTTP " + r.status);
        return answer;
      });
    });
  }

  function flash(text, bad) {
    var box = document.getElementById("flash");
    if (!box) return;
    box.textContent = text;
    box.className = bad ? "note bad" : "note";
  }

  // -- the sessions page: its rows, refreshed every 2 s (first page, no search) --
  var table = document.querySelector("table.sessions[data-live]");
  if (table) {
    setInterval(function () {
      fetch(root + "/?rows=1", { headers: { Accept: "text/html" } })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          var holder = document.createElement("table");
          holder.innerHTML = html;
          var rows = holder.querySelector("tbody");
          var old = document.getElementById("sessions");
          if (rows && old) old.replaceWith(rows);
          var known = document.getElementById("known");
          if (rows && known) known.textContent = rows.dataset.known;
        })
        .catch(function () {});
    }, 2000);
  }

  // -- a session page ----------------------------------------------------------
  var timeline = document.getElementById("timeline");
  if (!timeline) return;
  var sid = timeline.dataset.sid;
  var base = "/sessions/" + encodeURIComponent(sid);
  var stop = document.getElementById("stop");

  function decided(eid) {
    document.querySelectorAll(".decide").forEach(function (box) {
      if (box.dataset.eid === eid) box.remove();
    });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button");
    if (!button) return;
    var box = button.closest(".decide");
    if (box) {
      var approve = button.classList.contains("approve");
      box.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
      post(base + "/approvals/" + encodeURIComponent(box.dataset.eid), { approve: approve })
        .then(function () {
          flash((approve ? "Approved " : "Denied ") + box.dataset.eid);
          decided(box.dataset.eid);
        }, function (error) {
          flash(error.message, true);
          box.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
        });
    } else if (button === stop) {
      stop.disabled = true;
      post(base + "/stop", {}).then(function (answer) {
        flash(answer.stopped ? "Stop requested." : "No turn runs: nothing to stop.");
      }, function (error) {
        stop.disabled = false;
        flash(error.message, true);
      });
    }
  });

  function show(d) {
    var nearEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
    var last = timeline.lastElementChild;
    if (d.kind === "text" && last && last.dataset.call === d.call) {
      last.querySelector(".text").textContent += d.text;
    } else {
      timeline.insertAdjacentHTML("beforeend", d.html);
    }
    if (d.kind === "approval.decided" && d.eid) decided(d.eid);
    var state = document.querySelector("#state .state");
    state.textContent = d.state;
    state.className = "state st-" + d.state.replace(/ /g, "-");
    document.getElementById("turns").textContent = d.turns;
    document.getElementById("tokens").textContent = d.tokens;
    document.getElementById("entries").textContent = d.seq;
    if (d.epoch) document.getElementById("epoch").textContent = d.epoch;
    timeline.dataset.last = d.seq;
    var active = d.state === "running" || d.state === "waiting for approval";
    stop.hidden = !active;
    if (active && d.kind === "turn.started") stop.disabled = false;
    if (nearEnd) window.scrollTo(0, document.body.scrollHeight);
  }

  if (timeline.dataset.live === "1") {
    window.scrollTo(0, document.body.scrollHeight); // the latest entries
    var source = new EventSource(root + base + "/follow?after=" + timeline.dataset.last);
    source.addEventListener("entry", function (event) { show(JSON.parse(event.data)); });
  }
})();
