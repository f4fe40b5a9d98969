// The dashboard's live half: server-sent events keep the pages current, and the action forms
// call the JSON API, which the login cookie authenticates. Text from the data only ever goes
// into the page through textContent, never as HTML.
'use strict';

const main = document.querySelector('main[data-page]');

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

const compact = (value) => JSON.stringify(value);
// Messages can cross (a stream's and an action's answer): an older version never wins.
const older = (a, b) => Date.parse(a) < Date.parse(b);

// The same formatting as shown() in dashboard.py, so live updates look like the first render.
function shown(field, value) {
  if (value === null || value === undefined) return '—';
  if (field.endsWith('At')) return String(value).slice(0, 19).replace('T', ' ');
  if (typeof value === 'object' || typeof value === 'boolean') {
    return JSON.stringify(value, null, 2);
  }
  return String(value);
}

// A table row; strings become text nodes.
function rowOf(cells, className) {
  const tr = el('tr', className);
  for (const cell of cells) {
    const td = el('td');
    td.append(cell);
    tr.append(td);
  }
  return tr;
}

function badge(field, value) {
  const node = el('span', `badge ${field}-${value}`, value);
  node.dataset.field = field;
  return node;
}

function say(message, isError = false) {
  const box = document.getElementById('outcome');
  box.textContent = message;
  box.className = isError ? 'outcome error' : 'outcome';
}

// A refusal that lists several problems (a resume's answers) names each one's field.
function problem(data, response) {
  const error = data?.error;
  if (error?.errors?.length) {
    return error.errors.map((e) => (e.field ? `${e.field}: ${e.message}` : e.message)).join('; ');
  }
  return error?.message ?? `${response.status} ${response.statusText}`;
}

async function api(path, body, method = body === undefined ? 'GET' : 'POST') {
  const options = {
    method, credentials: 'same-origin', headers: { 'content-type': 'application/json' },
  };
  if (body !== undefined) options.body = JSON.stringify(body);
  const response = await fetch(path, options);
  if (response.status === 401) {
    location.assign('/login');
    throw new Error('The login has expired or the token was revoked.');
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new Error(problem(data, response));
  return data;
}

// EventSource retries a dropped connection by itself (with Last-Event-ID) but gives up on a
// refused one, so this reopens it. `handlers` maps an event name to what to do with its data;
// onOpen catches up on whatever happened while the stream was not connected. The returned
// function closes the stream for good (a run's stream ends once the run has).
function stream(url, handlers, onOpen = async () => {}) {
  const live = document.getElementById('live');
  let source = null;
  let closed = false;
  const connect = () => {
    if (closed) return;
    source = new EventSource(url);
    for (const [kind, handle] of Object.entries(handlers)) {
      source.addEventListener(kind, (event) => handle(JSON.parse(event.data)));
    }
    source.addEventListener('open', () => {
      live.textContent = 'live';
      live.className = 'live on';
      onOpen().catch((error) => say(error.message, true));
    });
    source.addEventListener('error', () => {
      if (closed) return;
      live.textContent = 'reconnecting…';
      live.className = 'live';
      if (source.readyState === EventSource.CLOSED) setTimeout(connect, 5000);
    });
  };
  connect();
  return (text) => {
    closed = true;
    source?.close();
    live.textContent = text;
    live.className = 'live';
  };
}

function haystack(job) {
  const parts = [job.jobId, job.toolName, job.sessionId, job.userId, job.callId];
  return [...parts.map((p) => p ?? ''), compact(job.args)].join(' ').toLowerCase();
}

function jobsPage() {
  const rows = document.getElementById('jobs');
  const search = document.getElementById('search');
  const empty = document.getElementById('empty');
  const state = main.dataset.state;
  const matches = (row) => row.dataset.search.includes(search.value.trim().toLowerCase());

  function row(job) {
    const link = el('a', '', job.jobId);
    link.href = `/jobs/${encodeURIComponent(job.jobId)}`;
    const texts = ['sessionId', 'userId', 'createdAt', 'deadlineAt'].map((f) => shown(f, job[f]));
    const tr = rowOf(
      [link, job.toolName, badge('state', job.state), badge('delivery', job.delivery), ...texts],
      'changed',
    );
    Object.assign(tr.dataset, { jobId: job.jobId, search: haystack(job), updated: job.updatedAt });
    return tr;
  }

  function upsert(job) {
    const old = [...rows.rows].find((r) => r.dataset.jobId === job.jobId);
    if (old && older(job.updatedAt, old.dataset.updated)) return;
    if (state && job.state !== state) {
      old?.remove();
    } else if (!old || old.dataset.updated !== job.updatedAt) {
      const fresh = row(job);
      fresh.hidden = !matches(fresh);
      if (old) old.replaceWith(fresh);
      else if (main.dataset.newest) rows.prepend(fresh);
    }
    empty.hidden = rows.rows.length > 0;
  }

  search.addEventListener('input', () => {
    for (const r of rows.rows) r.hidden = !matches(r);
    const url = new URL(location.href);
    url.searchParams.set('q', search.value);
    history.replaceState(null, '', url);
  });
  // The stream starts at the moment it opens; the list fills in what came before.
  stream('/v1/events', { job: upsert }, async () => {
    const query = new URLSearchParams({ limit: '100' });
    if (state) query.set('state', state);
    const { jobs } = await api(`/v1/jobs?${query}`);
    for (const job of jobs.reverse()) upsert(job);
  });
}

function bodyOf(form) {
  const body = {};
  for (const input of form.querySelectorAll('[data-kind]')) {
    if (input.dataset.kind === 'bool') {
      body[input.name] = input.checked;
    } else if (input.dataset.kind === 'json') {
      try {
        body[input.name] = JSON.parse(input.value);
      } catch {
        throw new Error(`The ${input.name} is not valid JSON.`);
      }
    } else if (input.value.trim()) {
      body[input.name] = input.value.trim();
    }
  }
  return body;
}

// The same command as curl() in dashboard.py.
const shell = (text) => `'${text.replaceAll("'", "'\\''")}'`;
const curl = (url, body) => [
  `curl -X POST ${shell(url)} \\`,
  '  -H "Authorization: Bearer $LONGCALL_TOKEN" \\',
  "  -H 'Content-Type: application/json' \\",
  `  -d ${shell(compact(body))}`,
].join('\n');

function jobPage() {
  let job = JSON.parse(main.dataset.job);
  const path = main.dataset.path;
  const log = document.getElementById('log');
  const transcript = document.getElementById('transcript');
  let lastSeq = Math.max(0, ...[...log.rows].map((r) => Number(r.cells[0].textContent)));
  let loads = 0;
  let soon = null;

  function show(fresh) {
    if (older(fresh.updatedAt, job.updatedAt)) return;
    const moved = ['state', 'delivery', 'sessionId', 'deliveredAt'].some((f) => fresh[f] !== job[f]);
    job = fresh;
    for (const node of main.querySelectorAll('[data-field]')) {
      const field = node.dataset.field;
      node.textContent = shown(field, job[field]);
      if (node.classList.contains('badge')) node.className = `badge ${field}-${job[field]}`;
    }
    document.getElementById('actions').disabled = job.state !== 'started';
    document.getElementById('finished').hidden = job.state === 'started';
    if (moved) loadTranscriptSoon();
  }

  function addEvent(event) {
    if (event.seq <= lastSeq) return;
    lastSeq = event.seq;
    const code = el('code', '', compact(event.data));
    log.append(rowOf([String(event.seq), shown('createdAt', event.createdAt), event.kind, code],
      'changed'));
    loadTranscriptSoon();
  }

  const mine = (id) => (id && id === job.callId ? 'call this-job' : 'call');
  function turn(event) {
    const li = el('li', event.author === 'user' ? 'turn user' : 'turn agent');
    li.append(el('span', 'author', event.author));
    if (event.text) li.append(el('p', 'text', event.text));
    for (const call of event.functionCalls ?? []) {
      li.append(el('pre', mine(call.id), `→ ${call.name}(${compact(call.args)})`));
    }
    for (const response of event.functionResponses ?? []) {
      li.append(el('pre', mine(response.id), `← ${response.name}: ${compact(response.response)}`));
    }
    return li;
  }

  async function loadTranscript() {
    const ticket = ++loads; // an older answer arriving late must not replace a newer one
    const note = (text) => transcript.replaceChildren(el('li', 'note', text));
    if (!job.sessionId) return note('This job is not attached to an agent session.');
    try {
      const data = await api(`/v1/sessions/${encodeURIComponent(job.sessionId)}/transcript`);
      if (ticket !== loads) return;
      if (data.events.length) transcript.replaceChildren(...data.events.map(turn));
      else note('The session has no events yet.');
    } catch (error) {
      if (ticket === loads) note(`No transcript: ${error.message}`);
    }
  }
  function loadTranscriptSoon() {
    clearTimeout(soon);
    soon = setTimeout(loadTranscript, 150);
  }

  for (const form of document.querySelectorAll('form.action')) {
    const verb = form.dataset.verb;
    const code = form.querySelector('.curl code');
    const refresh = () => {
      try {
        code.textContent = curl(`${location.origin}${path}/${verb}`, bodyOf(form));
      } catch (error) {
        code.textContent = `# ${error.message}`;
      }
    };
    form.addEventListener('input', refresh);
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const button = form.querySelector('button');
      button.disabled = true;
      try {
        const answer = await api(`${path}/${verb}`, bodyOf(form));
        show(answer.job);
        const state = answer.job.state;
        say(answer.changed ? `Done; the job is ${state}.` : `Nothing changed; the job is ${state}.`);
      } catch (error) {
        say(error.message, true);
      } finally {
        button.disabled = false;
      }
    });
    refresh();
  }

  loadTranscript();
  // Opens with the job as it is now, then sends each new log entry and each change.
  stream(`${path}/events`, { job: show, event: addEvent });
}

// -- runs ------------------------------------------------------------------------------------

const TERMINAL = ['completed', 'failed', 'cancelled'];

function runsPage() {
  const rows = document.getElementById('runs');
  const empty = document.getElementById('empty');
  const live = document.getElementById('live');
  const status = main.dataset.status;

  function row(run) {
    const link = el('a', '', run.runId);
    link.href = `/runs/${encodeURIComponent(run.runId)}`;
    const tr = rowOf([
      link, run.workflowId, badge('status', run.status), shown('userId', run.userId),
      `${run.retryCount}/${run.maxRetries}`, shown('createdAt', run.createdAt),
      shown('updatedAt', run.updatedAt),
    ]);
    tr.dataset.runId = run.runId;
    tr.dataset.updated = run.updatedAt;
    return tr;
  }

  // Polls the newest page: a run's story changes too often for a table row to need more.
  async function refresh() {
    const query = new URLSearchParams({ limit: '100' });
    if (status) query.set('status', status);
    try {
      const { runs } = await api(`/v1/runs?${query}`);
      const old = new Map([...rows.rows].map((r) => [r.dataset.runId, r]));
      const fresh = runs.map((run) => {
        const before = old.get(run.runId);
        if (before && before.dataset.updated === run.updatedAt) return before;
        const made = row(run);
        made.className = 'changed';
        return made;
      });
      rows.replaceChildren(...fresh);
      empty.hidden = fresh.length > 0;
      live.textContent = 'live';
      live.className = 'live on';
    } catch (error) {
      live.textContent = 'reconnecting…';
      live.className = 'live';
    }
  }
  if (main.dataset.newest) {
    refresh();
    setInterval(refresh, 2000);
  } else {
    live.textContent = 'older runs';
  }
}

// An answer from the inputs the server built from the question's schema (dashboard.py).
function answersOf(form) {
  const body = {};
  for (const input of form.querySelectorAll('[data-key]:not(fieldset)')) {
    const { key, prop, kind } = input.dataset;
    const required = 'required' in input.dataset;
    let value;
    if (kind === 'boolean') {
      value = input.checked;
    } else if (kind === 'enum') {
      value = JSON.parse(input.value);
    } else if (kind === 'number' || kind === 'integer') {
      if (input.value.trim() === '') continue;
      value = Number(input.value);
    } else if (kind === 'json') {
      try {
        value = JSON.parse(input.value);
      } catch {
        throw new Error(`The answer to ${key} is not valid JSON.`);
      }
    } else {
      if (input.value === '' && prop && !required) continue;
      value = input.value;
    }
    if (prop) {
      body[key] = body[key] ?? {};
      body[key][prop] = value;
    } else {
      body[key] = value;
    }
  }
  // An object whose properties are all optional and left empty is still an answer.
  for (const fieldset of form.querySelectorAll('fieldset[data-key]')) {
    if (!(fieldset.dataset.key in body)) body[fieldset.dataset.key] = {};
  }
  return body;
}

function runPage() {
  let run = JSON.parse(main.dataset.run);
  const path = main.dataset.path;
  const log = document.getElementById('log');
  const steps = document.getElementById('steps');
  const errors = document.getElementById('errors');
  const resume = document.getElementById('resume');
  const cancel = document.getElementById('cancel');
  const answer = document.getElementById('answer');
  let lastSeq = Math.max(0, ...[...log.rows].map((r) => Number(r.cells[0].textContent)));
  let close = () => {};

  const pendingKey = (r) => JSON.stringify(r.pendingInterrupts.map((p) => [p.key, p.error]));

  function show(fresh) {
    if (older(fresh.updatedAt, run.updatedAt)) return;
    run = fresh;
    for (const node of main.querySelectorAll('[data-field]')) {
      const field = node.dataset.field;
      node.textContent = shown(field, run[field]);
      if (node.classList.contains('badge')) node.className = `badge ${field}-${run[field]}`;
    }
    errors.replaceChildren(...run.errors.map((e) => {
      const li = el('li');
      li.append(el('code', '', compact(e)));
      return li;
    }));
    steps.replaceChildren(...run.steps.map((s) => rowOf([
      String(s.position), s.name, s.ok ? 'ok' : 'failed', String(s.attempts),
      el('code', '', compact(s.result)), shown('finishedAt', s.finishedAt),
    ])));
    cancel.querySelector('fieldset').disabled = TERMINAL.includes(run.status);
    if (pendingKey(run) !== main.dataset.pending) {
      // The run asks something else now: the form is built by the server from its schema.
      if (run.pendingInterrupts.length) {
        location.reload();
      } else {
        main.dataset.pending = pendingKey(run);
        answer.replaceChildren(el('h3', '', 'Answer and resume'),
          el('p', 'note', 'The run is not waiting for an answer.'));
      }
    }
    if (TERMINAL.includes(run.status)) close('finished');
  }

  function addEvent(event) {
    if (event.seq <= lastSeq) return;
    lastSeq = event.seq;
    const code = el('code', '', compact(event.data));
    log.append(rowOf([String(event.seq), shown('createdAt', event.createdAt), event.kind, code],
      'changed'));
  }

  if (resume) {
    const code = resume.querySelector('.curl code');
    const refresh = () => {
      try {
        code.textContent = curl(`${location.origin}${path}/resume`, answersOf(resume));
      } catch (error) {
        code.textContent = `# ${error.message}`;
      }
    };
    resume.addEventListener('input', refresh);
    resume.addEventListener('change', refresh);
    resume.addEventListener('submit', async (event) => {
      event.preventDefault();
      const button = resume.querySelector('button');
      button.disabled = true;
      try {
        const queued = await api(`${path}/resume`, answersOf(resume));
        say(`Answered; the run is ${queued.status}.`);
        show(queued);
      } catch (error) {
        say(error.message, true);
      } finally {
        button.disabled = false;
      }
    });
    refresh();
  }

  cancel.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      const after = await api(path, undefined, 'DELETE');
      const note = after.cancelRequested && !TERMINAL.includes(after.status)
        ? '; it stops at its next task call' : '';
      say(`The run is ${after.status}${note}.`);
      show(after);
    } catch (error) {
      say(error.message, true);
    }
  });

  // Opens with the run as it is now, then sends each new log entry and each change; it ends
  // once the run has completed, failed or been cancelled.
  if (TERMINAL.includes(run.status)) {
    document.getElementById('live').textContent = 'finished';
  } else {
    close = stream(`${path}/events?after=${lastSeq}`, { run: show, event: addEvent });
  }
}

// -- schedules -------------------------------------------------------------------------------

const pausedBadge = (paused) => badge('paused', paused ? 'paused' : 'active');
// The same as local_time() in dashboard.py: 2025-03-30 03:00:00 +02:00.
const localTime = (text) => `${text.slice(0, 19).replace('T', ' ')} ${text.slice(19)}`;

// The same command as curl_as() in dashboard.py.
function curlAs(method, url, body) {
  const lines = [`curl -X ${method} ${shell(url)}`, '  -H "Authorization: Bearer $LONGCALL_TOKEN"'];
  if (body !== undefined) {
    lines.push("  -H 'Content-Type: application/json'", `  -d ${shell(compact(body))}`);
  }
  return lines.join(' \\\n');
}

// Polls `load` every two seconds while the page is open, saying in the header whether it can.
function poll(load) {
  const live = document.getElementById('live');
  const look = async () => {
    try {
      await load();
      live.textContent = 'live';
      live.className = 'live on';
    } catch (error) {
      live.textContent = 'reconnecting…';
      live.className = 'live';
    }
  };
  look();
  return setInterval(look, 2000);
}

function schedulesPage() {
  const rows = document.getElementById('schedules');
  const empty = document.getElementById('empty');

  function row(cron) {
    const link = el('a', '', cron.name);
    link.href = `/schedules/${encodeURIComponent(cron.cronId)}`;
    const tr = rowOf([
      link, cron.workflowId, cron.cronExpression, cron.timezone, cron.concurrencyPolicy,
      pausedBadge(cron.paused), shown('nextFireAt', cron.nextFireAt),
      String(cron.activeRunCount), String(cron.executionCount),
    ]);
    tr.dataset.cronId = cron.cronId;
    return tr;
  }

  if (!main.dataset.first) {
    document.getElementById('live').textContent = 'later page';
    return;
  }
  poll(async () => {
    const { crons } = await api('/v1/cron?limit=100');
    const old = new Map([...rows.rows].map((r) => [r.dataset.cronId, r]));
    rows.replaceChildren(...crons.map((cron) => {
      const before = old.get(cron.cronId);
      const made = row(cron);
      if (before && before.textContent === made.textContent) return before;
      if (before) made.className = 'changed';
      return made;
    }));
    empty.hidden = crons.length > 0;
  });
}

function schedulePage() {
  let cron = JSON.parse(main.dataset.cron);
  const path = main.dataset.path;
  const forms = Object.fromEntries(
    ['pause', 'resume', 'trigger', 'delete'].map((id) => [id, document.getElementById(id)]),
  );
  let timer = null;

  function show(fresh) {
    cron = fresh;
    const fields = main.querySelectorAll('h1 [data-field], dl [data-field], pre [data-field]');
    for (const node of fields) {
      const field = node.dataset.field;
      if (field === 'paused') {
        node.replaceWith(pausedBadge(cron.paused));
      } else {
        node.textContent = shown(field, cron[field]);
      }
    }
    forms.pause.querySelector('fieldset').disabled = cron.paused;
    forms.resume.querySelector('fieldset').disabled = !cron.paused;
    document.getElementById('next').replaceChildren(...cron.nextFireTimes.map(
      (t) => rowOf([localTime(t.local), shown('fireAt', t.utc)]),
    ));
    document.getElementById('fires').replaceChildren(...cron.recentFires.map((f) => {
      let run = '—';
      if (f.runId) {
        run = el('a', '', f.runId);
        run.href = `/runs/${encodeURIComponent(f.runId)}`;
      }
      return rowOf([shown('fireAt', f.fireAt), badge('outcome', f.outcome), run]);
    }));
  }

  // Each button does what the curl command beside it does.
  function act(form, method, url, body, done) {
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const button = form.querySelector('button');
      button.disabled = true;
      try {
        const answer = await api(url, body, method);
        await done(answer);
      } catch (error) {
        say(error.message, true);
      } finally {
        button.disabled = false;
      }
    });
  }
  act(forms.pause, 'PATCH', path, { paused: true }, (answer) => {
    show(answer);
    say('Paused: nothing fires until it is resumed.');
  });
  act(forms.resume, 'PATCH', path, { paused: false }, (answer) => {
    show(answer);
    say(`Resumed; the next fire is at ${shown('nextFireAt', answer.nextFireAt)} UTC.`);
  });
  act(forms.trigger, 'POST', `${path}/trigger`, undefined, async (answer) => {
    say(answer.runId
      ? `Started run ${answer.runId}.`
      : 'Skipped: a run of this schedule is still active.');
    show(await api(path));
  });
  act(forms.delete, 'DELETE', path, undefined, () => {
    clearInterval(timer);
    location.assign('/schedules');
  });
  timer = poll(async () => show(await api(path)));
}

if (main?.dataset.page === 'jobs') jobsPage();
if (main?.dataset.page === 'job') jobPage();
if (main?.dataset.page === 'runs') runsPage();
if (main?.dataset.page === 'run') runPage();
if (main?.dataset.page === 'schedules') schedulesPage();
if (main?.dataset.page === 'schedule') schedulePage();
