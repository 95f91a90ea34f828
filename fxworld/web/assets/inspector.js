// The fxworld inspector's script: live rows, Approve / Deny / Stop. No framework,
// nothing fetched from elsewhere. Every row's HTML comes escaped from the server;
// streamed text is added as text (textContent), never as markup. Deny and Stop ask
// to be confirmed in place (a second button) before anything is sent; the note
// typed beside a call goes with Approve (its note) or Deny (its reason).
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

  // -- the sessions page: its rows, refreshed every 2 s (first page), keeping the
  // filters of the URL; Clear on a row records that a person saw what it needs --
  var table = document.querySelector("table.sessions[data-live]");
  var anyTable = document.querySelector("table.sessions");
  var filters = document.querySelector("form.filters");
  if (filters) { // a URL with only the filters chosen: no empty "agent=&state="
    filters.addEventListener("submit", function () {
      filters.querySelectorAll("input, select").forEach(function (x) {
        if (!x.value) x.disabled = true;
      });
    });
  }
  if (anyTable) {
    anyTable.addEventListener("click", function (event) {
      var button = event.target.closest("button.clear");
      if (!button) return;
      button.disabled = true;
      var sid = button.dataset.sid;
      post("/sessions/" + encodeURIComponent(sid) + "/clear", { upto: Number(button.dataset.upto) })
        .then(function () {
          flash("Cleared " + sid + ": recorded in its log.");
          var cell = button.closest("td");
          cell.querySelectorAll(".att:not(.att-waiting):not(.att-stuck)").forEach(function (x) { x.remove(); });
          button.remove();
        }, function (error) {
          button.disabled = false;
          flash(error.message, true);
        });
    });
  }
  if (table) {
    var params = new URLSearchParams(location.search);
    params.set("rows", "1"); // the same filter, the table's rows only
    setInterval(function () {
      fetch(root + "/?" + params.toString(), { headers: { Accept: "text/html" } })
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
  var stopConfirm = document.getElementById("stop-confirm");

  function decided(eid) {
    document.querySelectorAll(".decide").forEach(function (box) {
      if (box.dataset.eid === eid) box.remove();
    });
  }

  function confirming(box, on) { // Deny's second step, in place of Approve / Deny
    box.querySelector(".confirm").hidden = !on;
    box.querySelector("button.approve").hidden = on;
    box.querySelector("button.deny:not(.yes)").hidden = on;
    var note = box.querySelector("input.decision-note");
    note.placeholder = on ? "the reason (the model hears it)" : "note or reason (optional)";
    if (on) (note.value.trim() ? box.querySelector("button.yes") : note).focus();
  }

  function decide(box, button) {
    if (button.classList.contains("cancel")) return confirming(box, false);
    if (button.classList.contains("deny") && !button.classList.contains("yes")) {
      return confirming(box, true);
    }
    var approve = button.classList.contains("approve");
    var note = box.querySelector("input.decision-note");
    var body = { approve: approve };
    if (note.value.trim()) body[approve ? "note" : "reason"] = note.value.trim();
    var controls = box.querySelectorAll("button, input");
    controls.forEach(function (b) { b.disabled = true; });
    // a child's call (a box with data-sid) is decided on the child's own route
    var owner = box.dataset.sid ? "/sessions/" + encodeURIComponent(box.dataset.sid) : base;
    post(owner + "/approvals/" + encodeURIComponent(box.dataset.eid), body)
      .then(function () {
        flash((approve ? "Approved " : "Denied ") + box.dataset.eid);
        decided(box.dataset.eid);
      }, function (error) {
        flash(error.message, true);
        controls.forEach(function (b) { b.disabled = false; });
      });
  }

  function askStop(on) { // Stop's second step: a reason, then Yes or Cancel
    stopConfirm.hidden = !on;
    stop.hidden = on;
    if (on) document.getElementById("stop-yes").focus();
  }

  function sendStop(yes) {
    var reason = document.getElementById("stop-reason").value.trim();
    yes.disabled = true;
    post(base + "/stop", reason ? { reason: reason } : {}).then(function (answer) {
      flash(answer.stopped ? "Stop requested." : "No turn runs: nothing to stop.");
      yes.disabled = false;
      askStop(false);
      stop.disabled = true;
    }, function (error) {
      yes.disabled = false;
      flash(error.message, true);
    });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button");
    if (!button) return;
    var box = button.closest(".decide");
    if (box) {
      decide(box, button);
    } else if (button.classList.contains("retry")) {
      button.disabled = true;
      post(base + "/retry", {}).then(function (answer) {
        flash("Retry sent: the failed turn's prompt is prompt #" + answer.prompt + " now.");
      }, function (error) {
        button.disabled = false;
        flash(error.message, true);
      });
    } else if (button === stop) {
      askStop(true);
    } else if (button.id === "stop-cancel") {
      askStop(false);
    } else if (button.id === "stop-yes") {
      sendStop(button);
    }
  });

  // Rows go where the server's assemble() puts them on a page: in their turn's
  // group (a new group for a turn.started), a tool's end in place of its start.
  function collapseEnded() {
    var groups = timeline.querySelectorAll(":scope > li.turn");
    groups.forEach(function (group, i) {
      var details = group.querySelector("details");
      var running = group.querySelector(".turn-head .st-running, .turn-head .st-waiting-for-approval");
      if (i < groups.length - 1 && !running && !group.dataset.touched) details.open = false;
    });
  }

  timeline.addEventListener("click", function (event) {
    var head = event.target.closest("summary");
    if (head) head.closest("li.turn").dataset.touched = "1"; // the user's choice stays
  });

  function showRetry(state) {
    if (state !== "failed") {
      document.querySelectorAll(".turn-actions").forEach(function (x) { x.remove(); });
    }
  }

  function show(d) {
    var nearEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
    if (d.opens) { // the cards since the last group (its prompt, a fence) go in it
      var loose = [];
      for (var x = timeline.lastElementChild; x && !x.classList.contains("turn"); x = x.previousElementSibling) {
        loose.unshift(x);
      }
      timeline.insertAdjacentHTML("beforeend", d.opens);
      var entries = timeline.lastElementChild.querySelector("ol.entries");
      loose.forEach(function (card) { entries.appendChild(card); });
      collapseEnded();
    }
    var group = d.group ? document.getElementById(d.group) : null;
    var list = group ? group.querySelector("ol.entries") : timeline;
    if (d.html) {
      var last = list.lastElementChild;
      var old = d.replaces ? document.getElementById(d.replaces) : null;
      if (old) {
        old.outerHTML = d.html;
      } else if (d.kind === "text" && last && last.dataset.call === d.call) {
        last.querySelector(".text").textContent += d.text;
      } else {
        list.insertAdjacentHTML("beforeend", d.html);
      }
    }
    (d.updates || []).forEach(function (u) { // cards drawn again (calls a turn's end cut)
      var card = document.getElementById(u[0]);
      if (card) card.outerHTML = u[1];
    });
    if (group && d.head) group.querySelector("summary").outerHTML = d.head;
    if (group && d.actions) list.insertAdjacentHTML("afterend", d.actions);
    showRetry(d.state);
    if (d.kind === "approval.decided" && d.eid) decided(d.eid);
    var state = document.querySelector("#state .state");
    state.textContent = d.state;
    state.className = "state st-" + d.state.replace(/ /g, "-");
    document.getElementById("turns").textContent = d.turns;
    document.getElementById("tokens").textContent = d.tokens;
    document.getElementById("entries").textContent = d.seq;
    document.getElementById("takeovers").textContent = d.takeovers;
    timeline.dataset.last = d.seq;
    var active = d.state === "running" || d.state === "waiting for approval";
    if (!active) stopConfirm.hidden = true;
    stop.hidden = !active || !stopConfirm.hidden;
    if (active && d.kind === "turn.started") stop.disabled = false;
    if (nearEnd) window.scrollTo(0, document.body.scrollHeight);
  }

  // The calls that wait for a decision, a child session's among them (which this
  // page's stream does not carry): asked for again every 3 s while a turn runs,
  // and put in place only when the set of calls changed (a note being typed stays).
  var waiting = document.getElementById("waiting");
  function eids(node) {
    return Array.prototype.map.call(node.querySelectorAll(".decide"), function (b) {
      return (b.dataset.sid || "") + "/" + b.dataset.eid;
    }).join(" ");
  }
  function refreshWaiting() {
    var state = document.querySelector("#state .state").textContent;
    if (state !== "running" && state !== "waiting for approval") return;
    fetch(root + base + "/waiting", { headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var fresh = document.createElement("div");
        fresh.innerHTML = html;
        if (eids(fresh) !== eids(waiting)) waiting.innerHTML = html;
      })
      .catch(function () {});
  }

  if (timeline.dataset.live === "1") {
    setInterval(refreshWaiting, 3000);
    // No scrolling on load: the latest turn is open, the ones before it folded.
    var source = new EventSource(root + base + "/follow?after=" + timeline.dataset.last);
    source.addEventListener("entry", function (event) { show(JSON.parse(event.data)); });
  }
})();
