# A notification callback for examples/ansible/test/run.sh: ansible-core
# 2.14 (Debian bookworm) has no json stdout callback (it lives in the
# ansible.posix collection), so this one writes every task result and the
# final stats as JSON lines to $VFLAG_RESULTS, next to the normal screen
# output. Enabled only by the test (ANSIBLE_CALLBACKS_ENABLED=vflag_results).
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = '''
    name: vflag_results
    type: notification
    short_description: task results and stats as JSON lines (vflag's Ansible test)
    description:
      - >-
        One JSON object per task result, with play, host, task, status (ok, changed, skipped,
        failed or unreachable), changed, msg, rc, stdout, stderr and path; then one object
        with stats (the recap of every host).
    requirements:
      - VFLAG_RESULTS names the output file (appended to)
'''

import json
import os

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'notification'
    CALLBACK_NAME = 'vflag_results'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._path = os.environ.get('VFLAG_RESULTS')
        self._play = ''

    def _write(self, record):
        if not self._path:
            return
        with open(self._path, 'a') as f:
            f.write(json.dumps(record, default=str) + '\n')

    def _result(self, status, result):
        r = result._result
        if status == 'ok' and r.get('changed'):
            status = 'changed'
        self._write({
            'play': self._play,
            'host': result._host.get_name(),
            'task': result._task.get_name(),
            'status': status,
            'changed': bool(r.get('changed')),
            'msg': r.get('msg'),
            'rc': r.get('rc'),
            'stdout': r.get('stdout'),
            'stderr': r.get('stderr'),
            'path': r.get('path'),
        })

    def v2_playbook_on_play_start(self, play):
        self._play = play.get_name()

    def v2_runner_on_ok(self, result):
        self._result('ok', result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result('failed', result)

    def v2_runner_on_skipped(self, result):
        self._result('skipped', result)

    def v2_runner_on_unreachable(self, result):
        self._result('unreachable', result)

    def v2_playbook_on_stats(self, stats):
        self._write({'stats': {h: stats.summarize(h) for h in sorted(stats.processed.keys())}})
