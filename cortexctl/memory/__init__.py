"""The memory taxonomy, pure: types, schemas, canonical CBOR, forms, IDs and URIs.

Nothing here touches the store or the network.
"""
