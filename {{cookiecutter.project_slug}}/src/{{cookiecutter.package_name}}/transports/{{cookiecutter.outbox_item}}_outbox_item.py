{#- Rendered from the scaffold `generate item NAME --kind outbox` renders: one source. -#}
{%- with name = cookiecutter.outbox_item, cls = cookiecutter.outbox_item.title().replace('_', '') ~ 'EventsKafkaTransport' -%}
{% include 'src/{{cookiecutter.package_name}}/scaffold/outbox_transport.py.j2' %}
{%- endwith -%}
