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

// A refusal that lists several problems (a run's answers) names each one's field.
function problem(data, response) {
  const error = data?.error;
  if (error?.errors?.length) {
    return error.errors.map((e) => (e.field ? `${e.field}: ${e.message}` : e.message)).join('; ');
  }
  return error?.message ?? `${response.status} ${response.statusText}`;
}

// A button that cannot be taken back asks first, in a dialog of the page's own: the form's
// data-confirm is the question, data-confirm-detail what follows, data-confirm-yes the
// button that goes ahead; "Go back", focused first, and Escape say no. `sent` shows what is
// about to be sent, when there is something to read. Resolves to whether to go ahead.
function confirmed(form, sent = '') {
  if (!form.dataset.confirm) return Promise.resolve(true);
  let dialog = document.getElementById('confirm');
  if (!dialog) {
    dialog = el('dialog', 'confirm');
    dialog.id = 'confirm';
    dialog.setAttribute('aria-labelledby', 'confirm-question');
    const question = el('h2');
    question.id = 'confirm-question';
    const buttons = el('div', 'buttons');
    for (const [name, text] of [['no', 'Go back'], ['yes', '']]) {
      const button = el('button', name, text);
      button.type = 'button';
      buttons.append(button);
    }
    dialog.append(question, el('p', 'detail'), el('pre', 'sent'), buttons);
    document.body.append(dialog);
  }
  dialog.querySelector('h2').textContent = form.dataset.confirm;
  dialog.querySelector('.detail').textContent = form.dataset.confirmDetail ?? '';
  const shownSent = dialog.querySelector('.sent');
  shownSent.textContent = sent;
  shownSent.hidden = !sent;
  const yes = dialog.querySelector('.yes');
  const no = dialog.querySelector('.no');
  yes.textContent = form.dataset.confirmYes;
  yes.className = `yes ${form.classList.contains('decision') ? 'decision' : 'danger'}`;
  return new Promise((resolve) => {
    const answer = (ok) => {
      dialog.close();
      resolve(ok);
    };
    yes.onclick = () => answer(true);
    no.onclick = () => answer(false);
    dialog.oncancel = (event) => {
      event.preventDefault();
      answer(false);
    };
    dialog.showModal();
    no.focus();
  });
}

// An event log's rows are in time order (data-at); a new one goes before the first later one.
function placeInLog(log, row) {
  const at = Date.parse(row.dataset.at);
  const later = [...log.rows].find((r) => Date.parse(r.dataset.at) > at);
  log.insertBefore(row, later ?? null);
}

function logEntry(event) {
  const code = el('code', '', compact(event.data));
  const row = rowOf([String(event.seq), shown('createdAt', event.createdAt), event.kind, code],
    'changed');
  row.dataset.seq = event.seq;
  row.dataset.at = event.createdAt;
  return row;
}

const lastSeqOf = (log) => Math.max(
  0, ...[...log.querySelectorAll('tr[data-seq]')].map((r) => Number(r.dataset.seq)),
);

// The login's CSRF token, which the server wrote into the page: a change the login cookie
// authenticates is refused without it, so no other page (not even one on this host at
// another port, which gets the cookie too) can make one.
const csrfToken = document.querySelector('meta[name="csrf-token"]')?.content ?? '';

async function api(path, body, method = body === undefined ? 'GET' : 'POST') {
  const headers = { 'content-type': 'application/json' };
  if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  const options = { method, credentials: 'same-origin', headers };
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
  const more = document.getElementById('more');
  const state = main.dataset.state;
  let query = search.value.trim();
  let asked = 0;
  let soon = null;

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

  // The same words as nothing_found() in dashboard_jobs.py.
  function showEmpty() {
    const which = state ? `${state} jobs` : 'jobs';
    empty.textContent = query
      ? `No ${which} match “${query}”.`
      : `No ${which} here yet; new ones appear as they start.`;
    empty.hidden = rows.rows.length > 0;
  }

  function upsert(job) {
    const old = [...rows.rows].find((r) => r.dataset.jobId === job.jobId);
    if (old && older(job.updatedAt, old.dataset.updated)) return;
    if (state && job.state !== state) {
      old?.remove();
    } else if (!old || old.dataset.updated !== job.updatedAt) {
      const fresh = row(job);
      if (old) old.replaceWith(fresh);
      // A new job joins the results when it matches the search (the store's own search
      // looks in the same fields).
      else if (main.dataset.newest && haystack(job).includes(query.toLowerCase())) {
        rows.prepend(fresh);
      }
    }
    showEmpty();
  }

  // The newest page of jobs matching the search, from the store: not only the rows loaded.
  async function newest() {
    const params = new URLSearchParams({ limit: '100' });
    if (state) params.set('state', state);
    if (query) params.set('q', query);
    return (await api(`/v1/jobs?${params}`)).jobs;
  }

  async function searchNow() {
    const ticket = ++asked; // an older answer arriving late must not replace a newer one
    const jobs = await newest();
    if (ticket !== asked) return;
    main.dataset.newest = 'yes';
    rows.replaceChildren(...jobs.map((job) => Object.assign(row(job), { className: '' })));
    more.replaceChildren();
    if (jobs.length === 100) {
      const params = new URLSearchParams({ state, q: query, before: jobs.at(-1).jobId });
      const link = el('a', '', 'Older jobs');
      link.href = `/?${params}`;
      more.append(el('p'));
      more.firstChild.append(link);
    }
    showEmpty();
  }

  search.addEventListener('input', () => {
    query = search.value.trim();
    const url = new URL(location.href);
    url.searchParams.set('q', search.value);
    url.searchParams.delete('before');
    history.replaceState(null, '', url);
    clearTimeout(soon);
    soon = setTimeout(() => searchNow().catch((error) => say(error.message, true)), 250);
  });
  // The stream starts at the moment it opens; the list fills in what came before.
  stream('/v1/events', { job: upsert }, async () => {
    const ticket = asked;
    const jobs = await newest();
    if (ticket === asked) for (const job of jobs.reverse()) upsert(job);
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
  let lastSeq = lastSeqOf(log);
  let loads = 0;
  let soon = null;
  // Attached while the page is open: the change that brought its ids tells when. (A job
  // attached before is in the log already, or was attached before its time was recorded.)
  const attachedBefore = Boolean(job.sessionId && job.callId);

  // A moment of the job's own row, as milestones() in dashboard_jobs.py shows it; once.
  function milestone(kind, at, text) {
    if (!at || log.querySelector(`tr[data-milestone="${kind}"]`)) return;
    const row = rowOf(['', shown('createdAt', at), kind, text], 'milestone changed');
    row.dataset.milestone = kind;
    row.dataset.at = at;
    placeInLog(log, row);
  }

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
    // Only an answer that never reached its session can be sent again.
    document.getElementById('redeliver').disabled = !['orphaned', 'failed'].includes(job.delivery);
    if (!attachedBefore && job.sessionId && job.callId) {
      milestone('attached', job.updatedAt, `to session ${job.sessionId}, call ${job.callId}`);
    }
    milestone('delivered', job.deliveredAt, 'the final response is in the session');
    if (moved) loadTranscriptSoon();
  }

  function addEvent(event) {
    if (event.seq <= lastSeq) return;
    lastSeq = event.seq;
    placeInLog(log, logEntry(event));
    loadTranscriptSoon();
  }

  const mine = (id) => (id && id === job.callId ? 'call this-job' : 'call');
  function turn(event) {
    // Agents put function responses into the session as a turn of the user's, but no person
    // wrote them: a turn of nothing else is labelled as the tools'.
    const responses = event.functionResponses ?? [];
    const tool = responses.length > 0 && !event.text && !(event.functionCalls ?? []).length;
    const kind = tool ? 'tool' : event.author === 'user' ? 'user' : 'agent';
    const li = el('li', `turn ${kind}`);
    li.append(el('span', 'author', tool ? 'tool response' : event.author));
    if (event.text) li.append(el('p', 'text', event.text));
    for (const call of event.functionCalls ?? []) {
      li.append(el('pre', mine(call.id), `→ ${call.name}(${compact(call.args)})`));
    }
    for (const response of responses) {
      li.append(el('pre', mine(response.id), `← ${response.name}: ${compact(response.response)}`));
    }
    return li;
  }

  async function loadTranscript() {
    const ticket = ++loads; // an older answer arriving late must not replace a newer one
    const note = (text) => transcript.replaceChildren(el('li', 'note', text));
    if (!job.sessionId) return note('This job is not attached to an agent session.');
    try {
      // A session is (user, session id): name the job's user (only an admin's token uses it).
      const user = job.userId ? `?user=${encodeURIComponent(job.userId)}` : '';
      const data = await api(`/v1/sessions/${encodeURIComponent(job.sessionId)}/transcript${user}`);
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
        const body = bodyOf(form);
        if (!(await confirmed(form))) {
          say('Nothing was sent; the job is as it was.');
          return;
        }
        const answer = await api(`${path}/${verb}`, body);
        show(answer.job);
        const state = answer.job.state;
        if (verb === 'redeliver') say(`Done; its delivery is ${answer.job.delivery}.`);
        else say(answer.changed ? `Done; the job is ${state}.` : `Nothing changed; the job is ${state}.`);
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

if (main?.dataset.page === 'jobs') jobsPage();
if (main?.dataset.page === 'job') jobPage();
