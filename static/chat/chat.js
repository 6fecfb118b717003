// qwenweb chat page: one WebSocket, tokens rendered as they arrive.
// Answers run on the server whether or not a page is open: the page subscribes to its conversation,
// gets the running answer's snapshot (text so far + seq) and then live text numbered after it.
(function () {
  "use strict";

  const root = document.getElementById("chat");
  if (!root) return;
  const OUTCOMES = { stopped: gettext("Stopped"), incomplete: gettext("Incomplete"), error: gettext("Error") };
  const DISCONNECTED = gettext("Connection lost; reconnecting…");
  const NOT_AN_IMAGE = gettext("The attachment is not an image.");
  const initialMessages = Qw.readJson("history-data");
  const list = document.getElementById("messages");
  const statusLine = document.getElementById("status");
  const form = document.getElementById("composer");
  const profileSelect = document.getElementById("profile");
  const prompt = document.getElementById("prompt");
  const stopButton = document.getElementById("stop");
  const sendButton = document.getElementById("send");
  const regenButton = document.getElementById("regenerate");
  const imageInput = document.getElementById("image-input");
  const attachment = document.getElementById("attachment");
  const MAX_EDGE = Qw.dataNumber(root, "imageMaxEdge"); // settings.CHAT_IMAGE_MAX_EDGE

  let conversationId = root.dataset.conversation || null;
  let socket = null;
  let reconnectDelay = 500;
  let wasConnected = false; // a reconnect asks for the stored messages: answers may have changed meanwhile
  let pendingImage = null;
  let active = null; // the message being streamed: {id, el, content, reasoning, seq}
  const views = new Map(); // message id -> view

  let statusTransient = false; // queue place and prompt progress end with the answer

  function setStatus(text, transient) {
    statusLine.textContent = text || "";
    statusTransient = Boolean(transient);
  }

  function setStreaming(on) {
    stopButton.hidden = !on;
    sendButton.disabled = on;
    regenButton.disabled = on;
  }

  function createView(message) {
    const el = document.createElement("article");
    el.className = "message " + message.role;
    el.dataset.id = message.id;
    const body = document.createElement("div");
    body.className = "body";
    const view = { id: message.id, el, body, content: message.content || "", reasoning: message.reasoning || "", details: null, thought: null, scheduled: false };
    if (message.role === "assistant") {
      view.details = document.createElement("details");
      view.details.className = "reasoning";
      view.details.hidden = !view.reasoning;
      const summary = document.createElement("summary");
      summary.textContent = gettext("Thinking");
      view.thought = document.createElement("div");
      view.thought.className = "thought";
      view.details.append(summary, view.thought);
      const steps = document.createElement("div");
      steps.className = "tool-steps";
      steps.hidden = true;
      view.steps = QwToolSteps.list(steps, decide);
      view.steps.showAll(message.tool_steps);
      el.append(view.details, steps);
    }
    if (message.image_url) {
      const img = document.createElement("img");
      img.className = "attached";
      img.src = message.image_url;
      img.alt = "";
      el.append(img);
    }
    el.append(body);
    const footer = document.createElement("div");
    footer.className = "footer";
    el.append(footer, QwRender.copyMessageButton(() => view.content));
    view.footer = footer;
    list.append(el);
    views.set(message.id, view);
    paint(view);
    setOutcome(view, message.status, message.error, message.stats);
    return view;
  }

  function paint(view) {
    view.scheduled = false;
    if (view.el.classList.contains("user")) {
      view.body.textContent = view.content;
    } else {
      view.markdown = view.markdown || QwRender.markdownView(view.body); // re-renders only the open block
      view.markdown.update(view.content);
      if (view.reasoning) {
        view.details.hidden = false;
        view.thought.textContent = view.reasoning;
      }
    }
  }

  function schedulePaint(view) {
    if (!view.scheduled) {
      view.scheduled = true;
      requestAnimationFrame(() => paint(view));
    }
  }

  function setOutcome(view, status, error, stats) {
    view.el.dataset.status = status || "complete";
    view.footer.textContent = "";
    if (status && status !== "complete" && status !== "streaming") {
      const badge = document.createElement("span");
      badge.className = "badge " + status;
      badge.textContent = OUTCOMES[status] || status;
      view.footer.append(badge);
    }
    if (error) {
      const note = document.createElement("span");
      note.className = "error-text";
      note.setAttribute("role", "alert");
      note.textContent = error;
      view.footer.append(note);
    }
    for (const resumed of (stats && Array.isArray(stats.resumed) ? stats.resumed : [])) resumedMark(view, resumed.node);
    if (stats && stats.output_tokens !== undefined) {
      const line = document.createElement("span");
      line.className = "stats";
      line.textContent = statsLine(stats);
      view.footer.append(line);
    }
  }

  // The small mark of an answer that went on after its server failed, and where.
  function resumedMark(view, node) {
    const mark = document.createElement("span");
    mark.className = "badge resumed";
    mark.textContent = interpolate(gettext("resumed on %(node)s"), { node: String(node) }, true);
    view.footer.append(mark);
  }

  // "12 prompt tokens · 40 output tokens · first token 85 ms · 31.2 tokens/s" ("?" where a figure is unknown).
  function statsLine(stats) {
    const prompt = stats.prompt_tokens ?? "?";
    const output = stats.output_tokens ?? "?";
    return [
      interpolate(ngettext("%(count)s prompt token", "%(count)s prompt tokens", prompt), { count: prompt }, true),
      interpolate(ngettext("%(count)s output token", "%(count)s output tokens", output), { count: output }, true),
      interpolate(gettext("first token %(ms)s ms"), { ms: stats.ttft_ms ?? "?" }, true),
      interpolate(gettext("%(rate)s tokens/s"), { rate: stats.tokens_per_second ?? "?" }, true),
    ].join(" · ");
  }

  function scrollDown() {
    list.scrollTop = list.scrollHeight;
  }

  function connect() {
    socket = new WebSocket(Qw.socketUrl(root.dataset.wsPath));
    socket.addEventListener("open", () => {
      reconnectDelay = 500;
      root.dataset.connected = "1";
      setStatus("");
      if (conversationId) send({ type: "subscribe", conversation: conversationId, history: wasConnected });
      wasConnected = true;
      // An edited question (conversation_tools.js): its answer is asked for once, on the first connection.
      if (root.dataset.regenerate && conversationId) {
        delete root.dataset.regenerate;
        send({ type: "regenerate", conversation: conversationId });
      }
    });
    socket.addEventListener("close", () => {
      root.dataset.connected = "";
      // The answer goes on without this page; the snapshot after reconnecting says where it stands.
      if (active) {
        active = null;
        setStreaming(false);
      }
      setStatus(DISCONNECTED);
      setTimeout(connect, reconnectDelay);
      reconnectDelay = Math.min(reconnectDelay * 2, 10000);
    });
    socket.addEventListener("message", (event) => handle(JSON.parse(event.data)));
  }

  function finishActive(status, error, stats) {
    if (!active) return;
    paint(active);
    if (active.details) active.details.open = false;
    setOutcome(active, status, error, stats);
    active = null;
    setStreaming(false);
  }

  // The page gives the conversation URL for the all-zero id; reversed by Django, so urls.py stays the one place.
  function conversationUrl(id) {
    return root.dataset.conversationUrl.replace("00000000-0000-0000-0000-000000000000", id);
  }

  function adopt(id, title) {
    if (conversationId === id) return;
    conversationId = id;
    root.dataset.conversation = id;
    const url = conversationUrl(id);
    window.history.replaceState(null, "", url);
    const sidebar = document.getElementById("conversation-list");
    const li = document.createElement("li");
    li.className = "current";
    const a = document.createElement("a");
    a.href = url;
    a.dataset.id = id;
    a.textContent = title;
    li.append(a);
    sidebar.prepend(li);
  }

  // The stored state after a reconnect: an answer cut off by a restart shows its kept text and why.
  function refresh(messages) {
    messages.forEach((message) => {
      const view = views.get(message.id);
      if (!view) {
        createView(message);
      } else if (view !== active && message.status !== "streaming") {
        view.content = message.content || "";
        view.reasoning = message.reasoning || "";
        if (view.steps) view.steps.showAll(message.tool_steps);
        paint(view);
        setOutcome(view, message.status, message.error, message.stats);
      }
    });
  }

  // The running answer as it stands; live text numbered at or below its seq is already in it.
  function resume(event) {
    const view = views.get(event.message) || createView({ id: event.message, role: "assistant", status: "streaming" });
    view.content = event.content;
    view.reasoning = event.reasoning;
    view.seq = event.seq;
    view.steps.showAll(event.tool_steps);
    setOutcome(view, "streaming");
    active = view;
    setStreaming(true);
    paint(view);
    scrollDown();
  }

  // Text for the answer being shown, once: a page that subscribed mid-answer drops what its snapshot had.
  function isNew(event) {
    if (!active || active.id !== event.message || event.seq <= active.seq) return false;
    active.seq = event.seq;
    return true;
  }

  function handle(event) {
    if (event.conversation && conversationId && event.conversation !== conversationId && event.type !== "error") return;
    switch (event.type) {
      case "accepted": {
        adopt(event.conversation, event.title);
        if (event.regenerate) {
          const last = list.querySelector("article.message:last-child");
          if (last && last.classList.contains("assistant")) last.remove();
        }
        if (event.user_message && !views.has(event.user_message.id)) createView(event.user_message);
        active = views.get(event.assistant_message.id) || createView(event.assistant_message);
        active.seq = event.seq;
        setStreaming(true);
        scrollDown();
        break;
      }
      case "queued":
        setStatus(interpolate(gettext("Waiting in line: you are number %(position)s."), { position: event.position }, true), true);
        break;
      case "started":
        if (statusTransient) setStatus("");
        break;
      case "progress": {
        const percent = event.total ? Math.round((100 * event.processed) / event.total) : 0;
        setStatus(percent < 100 ? interpolate(gettext("Reading the prompt… %(percent)s"), { percent: percent + "%" }, true) : "", true);
        break;
      }
      case "notice":
        setStatus(event.text);
        break;
      case "resumed":
        if (active && active.id === event.message) resumedMark(active, event.node);
        setStatus("");
        break;
      case "snapshot":
        resume(event);
        break;
      case "idle":
        // No answer running: one this page still shows as streaming ended meanwhile; show how.
        if (list.querySelector('article.message[data-status="streaming"]')) send({ type: "history", conversation: conversationId });
        break;
      case "reasoning":
        if (isNew(event)) {
          active.reasoning += event.text;
          active.details.open = true;
          schedulePaint(active);
        }
        break;
      case "token":
        if (isNew(event)) {
          active.content += event.text;
          schedulePaint(active);
          scrollDown();
        }
        break;
      case "tool":
        if (isNew(event)) active.steps.show(event.step);
        break;
      case "done":
        if (active && active.id === event.message) {
          if (statusTransient) setStatus("");
          finishActive(event.status, event.error, event.stats);
        }
        break;
      case "history":
        refresh(event.messages);
        break;
      case "error":
        setStatus(event.message);
        statusLine.classList.add("error");
        setTimeout(() => statusLine.classList.remove("error"), 8000);
        break;
    }
  }

  // Allow or Deny of a writing tool that waits (the server takes it only from this person's pages).
  function decide(step, allow) {
    send({ type: "tool_decision", conversation: conversationId, step, allow });
  }

  function send(payload) {
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      setStatus(DISCONNECTED);
      return false;
    }
    socket.send(JSON.stringify(payload));
    return true;
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = prompt.value.trim();
    if (!text && !pendingImage) return;
    setStatus("");
    const profile = profileSelect ? profileSelect.value : undefined;
    if (send({ type: "send", conversation: conversationId, text, image: pendingImage, profile })) {
      prompt.value = "";
      clearImage();
    }
  });

  prompt.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  stopButton.addEventListener("click", () => send({ type: "stop", conversation: conversationId }));
  regenButton.addEventListener("click", () => {
    if (conversationId) send({ type: "regenerate", conversation: conversationId });
  });

  function clearImage() {
    pendingImage = null;
    attachment.hidden = true;
    imageInput.value = "";
  }

  document.getElementById("remove-image").addEventListener("click", clearImage);

  imageInput.addEventListener("change", () => {
    const file = imageInput.files && imageInput.files[0];
    if (!file) return;
    if (!file.type.startsWith("image/")) {
      setStatus(NOT_AN_IMAGE);
      clearImage();
      return;
    }
    const url = URL.createObjectURL(file);
    const img = new Image();
    img.onload = () => {
      const scale = Math.min(1, MAX_EDGE / Math.max(img.naturalWidth, img.naturalHeight));
      const canvas = document.createElement("canvas");
      canvas.width = Math.max(1, Math.round(img.naturalWidth * scale));
      canvas.height = Math.max(1, Math.round(img.naturalHeight * scale));
      canvas.getContext("2d").drawImage(img, 0, 0, canvas.width, canvas.height);
      pendingImage = canvas.toDataURL("image/jpeg", 0.9);
      attachment.querySelector("img").src = pendingImage;
      attachment.hidden = false;
      URL.revokeObjectURL(url);
    };
    img.onerror = () => {
      setStatus(NOT_AN_IMAGE);
      clearImage();
      URL.revokeObjectURL(url);
    };
    img.src = url;
  });

  initialMessages.forEach(createView);
  scrollDown();
  setStreaming(false);
  connect();
})();
