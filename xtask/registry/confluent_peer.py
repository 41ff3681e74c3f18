"""The independent side of the Protobuf and JSON Schema serde tests.

Confluent's own Python serializers (the `confluent-kafka` package:
`confluent_kafka.schema_registry.protobuf` and `.json_schema`) write and
read records against the same registry as the Rust serdes of
crates/kstreams-protobuf and crates/kstreams-json-schema, whose tests run
this file with the interpreter `cargo xtask registry start` exports as
KSTREAMS_TEST_CONFLUENT_PYTHON (a virtual environment with the package).

Usage (records are hex on stdout, so the caller needs no binary pipes):
  confluent_peer.py proto-write URL TOPIC PACKAGE NAME AGE
  confluent_peer.py proto-read  URL TOPIC PACKAGE HEX
  confluent_peer.py json-write  URL TOPIC SCHEMA DOCUMENT
  confluent_peer.py json-read   URL TOPIC HEX

The Protobuf message is `PACKAGE.User { string name = 1; int32 age = 2; }`
in file `PACKAGE/user.proto`, built here from a descriptor: the tests need
no protoc, and the serializer registers what it would for generated code.
"""

import json
import sys

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory


def user_class(package):
    """The message class of PACKAGE.User, as protoc would generate it."""
    file = descriptor_pb2.FileDescriptorProto(
        name=f"{package}/user.proto", package=package, syntax="proto3"
    )
    user = file.message_type.add(name="User")
    string = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
    int32 = descriptor_pb2.FieldDescriptorProto.TYPE_INT32
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    user.field.add(name="name", number=1, type=string, label=optional, json_name="name")
    user.field.add(name="age", number=2, type=int32, label=optional, json_name="age")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.User"))


def main(argv):
    command, url, topic = argv[1], argv[2], argv[3]
    client = SchemaRegistryClient({"url": url})
    context = SerializationContext(topic, MessageField.VALUE)
    if command == "proto-write":
        package, name, age = argv[4], argv[5], int(argv[6])
        cls = user_class(package)
        serializer = ProtobufSerializer(cls, client)
        print(serializer(cls(name=name, age=age), context).hex())
    elif command == "proto-read":
        package, record = argv[4], bytes.fromhex(argv[5])
        cls = user_class(package)
        deserializer = ProtobufDeserializer(cls, {"use.deprecated.format": False})
        message = deserializer(record, context)
        print(json.dumps(json_format.MessageToDict(message), sort_keys=True))
    elif command == "json-write":
        schema, document = argv[4], json.loads(argv[5])
        serializer = JSONSerializer(schema, client, lambda value, ctx: value)
        print(serializer(document, context).hex())
    elif command == "json-read":
        record = bytes.fromhex(argv[4])
        deserializer = JSONDeserializer(None, schema_registry_client=client)
        print(json.dumps(deserializer(record, context), sort_keys=True))
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv)
