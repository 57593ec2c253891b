"""The controller-side entry point: ``./clusterproof site`` and ``down`` run the playbooks through
ansible-runner and show a short live view of its events.

Controller tooling only: nothing here runs on a managed host, and the collection never imports it.
``progress`` is pure (events in, lines and results out); ``playbook`` drives ansible-runner;
``__main__`` is the command line. The e2e tests run their playbooks through ``playbook`` too.
"""
